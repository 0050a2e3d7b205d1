"""The workspace store: the SQLite database (WAL) and its migrations, imports of KB records
and documents, relations, labels, curator synonyms and workspace configuration.

May import: curation.matching, curation.templates, kb_sources.
"""
