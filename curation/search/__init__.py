"""The Curate page's services: the search session (query, retriever choice, ranked hits,
labels), answer suggestions, the entity-aware rerank and the index builds behind them.

May import: curation.access, curation.store, curation.matching, curation.jobs, curation.ranking,
curation.templates,
kb_sources, retrievers.
"""
