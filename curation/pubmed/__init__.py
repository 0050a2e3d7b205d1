"""PubMed as the corpus: query building, search, watches. From a partial relation, the
E-utilities query a curator would type (:mod:`curation.pubmed.query`: each slot's entity in the
forms papers write it, ORed within ``[tiab]``, the slots ANDed; :mod:`curation.pubmed.forms`: the
forms per slot type and the query syntax) and who the workspace is to NCBI
(:mod:`curation.pubmed.ncbi`: contact email and API key, admin-only settings); the search of
PubMed for a relation, its job kind and the ranking of what it imported (the Curate page's
ranking, hence curation.search); watches of relations (:mod:`curation.pubmed.watch`: add,
remove, what a watch searches; :mod:`curation.pubmed.watch_run`: a run since the last one;
:mod:`curation.pubmed.watch_digest`: what is new per relation; the ``watch`` job in
:mod:`curation.pubmed.watch_jobs`).

May import: curation.store, curation.matching, curation.access, curation.search, curation.jobs,
kb_sources, retrievers, curation.templates.
"""
