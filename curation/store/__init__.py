"""The workspace store: the database (SQLite in WAL mode, or PostgreSQL) and its migrations, and
every read and write of it. No other wing writes SQL: each calls the repository functions here.

- the database and its engine: ``workspace``, ``database`` (store setting, connection
  interface), ``connection`` (SQLite), ``postgres`` and ``dialect`` (the translation for
  PostgreSQL, which never leaves this wing), ``pg_errors``, ``pg_jobs`` (procrastinate's
  tables), ``migrations``, ``errors``, ``clock``, ``config`` (the data folder), ``safe_files``
  (no links, owner-only files);
- imports: ``importer``, ``import_rows``, ``import_log``, ``tracked``, ``transfer``;
- the KB and the corpus: ``relations``, ``documents``, ``synonyms``, ``citation_edges``;
- curators' work: ``labels``, ``label_types``, ``label_versions``, ``outbox``,
  ``adjudications``, ``sessions`` (web sign-ins), ``search_suggestions``;
- models: ``models`` (dense versions), ``model_files``, ``index_models``, ``rankers``,
  ``identities`` (``ModelVersionId``, ``RetrieverChoice``);
- the reads and writes behind the other wings: ``job_table`` (jobs), ``search_docs``,
  ``search_labels``, ``search_settings`` (search), ``training_data``, ``training_mesh``
  (training), ``evaluation_data`` (evaluation), ``app_queries`` (the app pages).

May import: curation.matching, curation.templates, kb_sources.
"""
