"""The fast learner: a learned ranker per schema over BM25, dense and entity evidence.

Modules: ``features`` (candidates and the feature vector; never a feature of a document's
origin), ``grades`` (graded relevance from EDEL's g classes and labels, a data table),
``model`` (LightGBM lambdarank, a logistic fallback; text files only), ``model_check`` (a
LightGBM file checked in Python and in a child process before this process reads it),
``versions`` (saved versions, their SHA-256 and manifest in the database, the active one per
schema and whether it can be used), ``version_files`` (the version folders, registering old
ones, removing orphans), ``manifest`` (what a manifest must hold), ``explain`` (top
contributions in words), ``cross`` (the cross-encoder's cached score as a feature: the top K,
the columns, the block a context reads) and ``pipeline`` (candidates -> features -> scores for
one workspace and schema).

Imported by search, evaluation, training and cli, which own the splits, the jobs and the user
interfaces.

May import: curation.store, curation.matching, curation.templates, kb_sources, retrievers.
"""
