"""Forward-only migrations of the workspace database.

``MIGRATIONS[i]`` takes a database from schema version ``i`` to ``i + 1`` (SQLite
``PRAGMA user_version``). Never edit a released migration: append a new one.
"""

from __future__ import annotations

from curation.store.migrations_base import BASE_MIGRATIONS

MIGRATIONS: list[str] = [
    *BASE_MIGRATIONS,  # 0 -> 9: curation/store/migrations_base.py
    # learned-ranker hardening (issue 35, curation/store/ranker_versions.py): ranker versions in
    # the database as dense ones are (numbers allocated by UNIQUE(schema, number), the model's
    # SHA-256 and the manifest kept here, not only in a file beside the model, a version being
    # saved recorded with its temporary folder and process so that orphans are cleaned up), and
    # one ranker round per schema at a time (a ranker_rounds row per running round).
    """
    CREATE TABLE ranker_versions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ident TEXT NOT NULL UNIQUE,
        schema TEXT NOT NULL,
        number INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('saving', 'saved')),
        file TEXT NOT NULL DEFAULT '',
        sha256 TEXT NOT NULL DEFAULT '',
        checked_sha256 TEXT NOT NULL DEFAULT '',
        manifest TEXT NOT NULL DEFAULT '{}',
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        tmp TEXT NOT NULL DEFAULT '',
        pid INTEGER,
        host TEXT NOT NULL DEFAULT '',
        UNIQUE (schema, number)
    );
    CREATE TABLE ranker_rounds (
        schema TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        started_at TEXT NOT NULL,
        started_by TEXT NOT NULL,
        started_from TEXT,
        pid INTEGER,
        host TEXT NOT NULL DEFAULT '',
        beat TEXT
    )
    """,
    # PubMed baseline import (issue 37, curation/store/baseline.py and baseline_files.py): the
    # ledger of NLM files imported (one import each, resumed at the first file not done), the
    # PMIDs NLM deleted (kept = 1: the document stays because it has labels or suggestions),
    # and the highest <PMID Version> of NLM's rare versioned citations.
    """
    CREATE TABLE baseline_files (
        name TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL DEFAULT '',
        md5_checked INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
        import_id INTEGER,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        added INTEGER NOT NULL DEFAULT 0,
        updated INTEGER NOT NULL DEFAULT 0,
        unchanged INTEGER NOT NULL DEFAULT 0,
        deleted INTEGER NOT NULL DEFAULT 0,
        kept INTEGER NOT NULL DEFAULT 0,
        error TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE baseline_deletions (
        pmid TEXT PRIMARY KEY,
        file TEXT NOT NULL,
        kept INTEGER NOT NULL DEFAULT 0,
        ts TEXT NOT NULL
    );
    CREATE TABLE baseline_versions (
        pmid TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        file TEXT NOT NULL
    )
    """,
    # Search PubMed for a relation (issue 37, item 1; curation/store/pubmed_hits.py): each
    # search (who, when, the Entrez query, PubMed's count, how many records it fetched and
    # imported) and the PMIDs it found in PubMed's relevance order; ``fetched_at`` is set on the
    # PMIDs that search imported, so their cards say "from PubMed, DATE" and a later watch can
    # tell new hits from old ones.
    """
    CREATE TABLE pubmed_searches (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ran_at TEXT NOT NULL,
        actor TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        pubmed_query TEXT NOT NULL,
        hit_count INTEGER NOT NULL,
        fetched INTEGER NOT NULL,
        imported INTEGER NOT NULL
    );
    CREATE INDEX pubmed_searches_query ON pubmed_searches(schema, query_key);
    CREATE TABLE pubmed_hits (
        search_id INTEGER NOT NULL REFERENCES pubmed_searches(id) ON DELETE CASCADE,
        pmid TEXT NOT NULL,
        pubmed_rank INTEGER NOT NULL,
        fetched_at TEXT,
        PRIMARY KEY (search_id, pmid)
    );
    CREATE INDEX pubmed_hits_pmid ON pubmed_hits(pmid)
    """,
    # Watch a relation for new abstracts (issue 37, item 2; curation/store/watches.py): a
    # watch (one relation, or a schema's relations filtered like the relation table) owned by
    # a curator, with the date its next run searches from (``mindate``, edat); every run (when,
    # query, date range, counts, best score, error); the PMIDs each run found new, per relation,
    # with their score in the relation's ranking.
    """
    CREATE TABLE watches (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        owner TEXT NOT NULL,
        schema TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('relation', 'filter')),
        target TEXT NOT NULL,
        spec TEXT NOT NULL,
        label TEXT NOT NULL,
        pubmed_query TEXT NOT NULL DEFAULT '',
        max_hits INTEGER NOT NULL,
        every_days INTEGER NOT NULL,
        mindate TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_run_at TEXT,
        UNIQUE (owner, schema, target)
    );
    CREATE TABLE watch_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        watch_id INTEGER NOT NULL REFERENCES watches(id) ON DELETE CASCADE,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        actor TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
        pubmed_query TEXT NOT NULL,
        mindate TEXT NOT NULL,
        maxdate TEXT NOT NULL,
        relations INTEGER NOT NULL,
        found INTEGER NOT NULL,
        fetched INTEGER NOT NULL,
        imported INTEGER NOT NULL,
        new_pmids INTEGER NOT NULL,
        best_score REAL,
        error TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX watch_runs_watch ON watch_runs(watch_id, id);
    CREATE TABLE watch_hits (
        watch_id INTEGER NOT NULL REFERENCES watches(id) ON DELETE CASCADE,
        query_key TEXT NOT NULL,
        pmid TEXT NOT NULL,
        run_id INTEGER NOT NULL REFERENCES watch_runs(id) ON DELETE CASCADE,
        score REAL,
        hit_rank INTEGER,
        PRIMARY KEY (watch_id, query_key, pmid)
    );
    CREATE INDEX watch_hits_relation ON watch_hits(query_key)
    """,
    # Bulk grading in the Curate list (issue 36, item 12; curation/store/labels.py
    # Labels.record_many): the labels given in one bulk grade share a ``batch`` id, so one undo
    # takes all of them back; NULL for a label given alone (every older label).
    """
    ALTER TABLE labels ADD COLUMN batch TEXT
    """,
    # Screening that learns within the query (issue 38; curation/screening/order.py): how many
    # of the relation's labels the shown order was learned from when the curator labelled the
    # document in the order learned within the query; NULL when it was shown as ranked (every
    # older label).
    """
    ALTER TABLE labels ADD COLUMN order_labels INTEGER
    """,
    # The cross-encoder's score as a learned-ranker feature (issue 45;
    # curation/store/cross_scores.py): one score per cross version (``model``: its id and the
    # first 12 hex digits of its weights' SHA-256), query text (``query``: a hash of the text
    # the cross-encoder read) and document, with the document's content hash when it was read
    # (a changed abstract is read again; a removed one takes its scores with it).
    """
    CREATE TABLE cross_scores (
        model TEXT NOT NULL,
        query TEXT NOT NULL,
        doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
        doc_hash TEXT NOT NULL,
        score REAL NOT NULL,
        PRIMARY KEY (model, query, doc_id)
    );
    CREATE INDEX cross_scores_doc ON cross_scores(doc_id)
    """,
]

#: Schema version this code writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)
