"""Evaluation: held-out query tasks from KB relations, trec_eval metrics and EntityRecall,
evaluation runs (as background jobs), the tables behind the Review and Evaluate pages, and the
speed bench.

May import: curation.search, curation.store, curation.matching, curation.jobs, curation.access,
curation.ranking,
curation.templates, kb_sources, retrievers.
"""
