"""Screening one query's whole candidate list with a model that learns within the query.

Modules: ``queue`` (the screening queue of one partial relation: its first stages' top N, the
ranker's scores and the TF-IDF / dense rows cached once, so a re-score is only the model),
``calibration`` (the ranker's score as a calibrated prior log-odds), ``learner`` (the per-query
model: a logistic regression over the queue's rows with the prior as offset, shrunk to the
static order while the labels are few), ``stopping`` (how many relevant remain, with an
interval, and when to stop for a recall target) and ``view`` (one call for a page: the order,
the estimate and the stopping advice after the labels given so far).

Pure numpy / SciPy / scikit-learn over arrays; the store is only read (document texts) and
nothing is written. Imported by cli, simulation and the app.

May import: curation.store, curation.ranking, curation.matching, curation.templates,
kb_sources, retrievers.
"""
