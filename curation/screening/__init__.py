"""Screening one query's whole candidate list with a model that learns within the query.

Modules: ``queue`` (the screening queue of one partial relation: its first stages' top N, the
ranker's scores and the TF-IDF / dense rows cached once, so a re-score is only the model),
``tfidf`` (those TF-IDF rows, counted in memory linear in the candidates' text),
``calibration`` (the ranker's score and rank as a calibrated prior log-odds), ``sources``
(which calibration a queue uses: a ranker version's own, or for any other ranking a rank-only
fit on held-out queries of the schema, pooled over the workspace's schemas, or the default,
with the held-out lists kept in the workspace), ``learner`` (the
per-query model: the prior moved towards the relevant labels' centroid and away from the
irrelevant ones', by weights that grow with the number of labels), ``stopping`` (how many
relevant remain, with an interval, and when to stop for a recall target), ``view`` (one call
for a page: the order, the estimate and the stopping advice after the labels given so far) and
``chart`` (found against screened, with the estimated total).

For a page: build the queue once per relation (``relation_queue(ctx, ranker, text, query,
query_key, extra=pubmed_ids, calibration=...)``: seconds, the ranker's features and TF-IDF; or,
when something else ranks the relation, ``order_queue(ws, query_key, ranking_order.order(...),
extra=..., calibration=ranking_source(...).calibration)``),
then after every label call ``screening_view(queue, labels)`` (milliseconds) and record its
``order_mode`` and ``order_labels`` with the next label; ``found_chart(view)`` draws the chart.

Pure numpy / SciPy / scikit-learn over arrays; the store is read (document texts, held-out
queries' relations) and written only by ``sources`` (the held-out lists it keeps, ``meta``
keys). Imported by cli, simulation and the app.

May import: curation.store, curation.ranking, curation.matching, curation.templates,
kb_sources, retrievers.
"""
