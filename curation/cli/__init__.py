"""The ``kbcurate`` command line: argument parsing (:mod:`.main`), the commands
(:mod:`.commands`), helpers both share (:mod:`.common`), the demo workspace, serving the app and
the online fetchers.

May import: every wing (curation.store, curation.access, curation.matching, curation.jobs,
curation.search, curation.evaluation, curation.training, curation.ranking, curation.pubmed,
curation.screening, curation.simulation), curation.templates, kb_sources, retrievers.
"""
