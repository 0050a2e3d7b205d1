"""The workspace store: the database (SQLite in WAL mode, or PostgreSQL) and its migrations, and
every read and write of it. No other wing writes SQL: each calls the repository classes here.

A repository class is built on a :class:`~curation.store.workspace.Workspace` (``Labels(ws)``)
and is the only code that holds the SQL of its table; other wings call its methods
(``Labels(ws).record(...)``), which return typed values. The same class runs on SQLite and on
PostgreSQL: its statements are written once, in SQLite's dialect, and translated inside the store
by ``dialect``.

- the database and its engine: ``workspace`` (with ``workspace_stats``, the counts of ``kbcurate
  stats``, and ``schema_files``, the workspace's own schemas), ``database`` (store setting,
  connection interface), ``connection`` (SQLite), ``postgres``, ``pg_rows`` (rows and cursors
  shaped like sqlite3's) and ``dialect`` (the translation for PostgreSQL, which never leaves this
  wing), ``pg_errors``, ``pg_jobs`` (procrastinate's tables), ``migrations``, ``errors``,
  ``clock``, ``config`` (the data folder), ``safe_files`` (no links, owner-only files),
  ``audit`` (``AuditEntry``, the audit log's rows);
- imports: ``importer``, ``import_rows``, ``import_log``, ``tracked``, ``transfer``;
- the repository classes: ``Documents`` (``documents``), ``Relations`` (``relations``),
  ``Labels`` (``labels``), ``Jobs`` (``jobs``), ``Models`` (``models``), ``Entities``
  (``entities``: entities and their synonyms), ``Rankers`` (``rankers``), ``Adjudications``
  (``adjudications``), ``WebSessions`` (``web_sessions``, web sign-ins), ``Suggestions``
  (``suggestions``), ``Settings`` (``settings``), ``Mesh`` (``mesh``), ``Citations``
  (``citations``);
- beside them: ``label_types``, ``label_versions``, ``outbox``, ``label_files`` (labels: types,
  their model versions, the outbox, file export), ``model_files``,
  ``index_models`` (models), ``identities`` (``ModelVersionId``, ``RetrieverChoice``).

May import: curation.matching, curation.templates, kb_sources.
"""
