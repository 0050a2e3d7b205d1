"""Forward-only migrations of the workspace database.

``MIGRATIONS[i]`` takes a database from schema version ``i`` to ``i + 1`` (SQLite
``PRAGMA user_version``). Never edit a released migration: append a new one.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 0 -> 1: initial schema
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    CREATE TABLE documents (
        doc_id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        abstract TEXT NOT NULL,
        source TEXT NOT NULL,
        journal TEXT NOT NULL DEFAULT '',
        year INTEGER,
        mesh TEXT NOT NULL DEFAULT '[]',
        refs TEXT NOT NULL DEFAULT '[]',
        content_hash TEXT NOT NULL,
        added_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX documents_source ON documents(source);

    CREATE TABLE annotations (
        doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
        start INTEGER NOT NULL,
        end INTEGER NOT NULL,
        text TEXT NOT NULL,
        type TEXT NOT NULL,
        ids TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX annotations_doc ON annotations(doc_id);

    CREATE TABLE relations (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        record_id TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        data TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        added_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (source, record_id)
    );
    CREATE INDEX relations_schema_query ON relations(schema, query_key);

    CREATE TABLE relation_slots (
        relation_id INTEGER NOT NULL REFERENCES relations(id) ON DELETE CASCADE,
        slot TEXT NOT NULL,
        entity_key TEXT NOT NULL,
        text TEXT NOT NULL
    );
    CREATE INDEX relation_slots_rel ON relation_slots(relation_id);
    CREATE INDEX relation_slots_key ON relation_slots(slot, entity_key);

    CREATE TABLE relation_pmids (
        relation_id INTEGER NOT NULL REFERENCES relations(id) ON DELETE CASCADE,
        pmid TEXT NOT NULL,
        PRIMARY KEY (relation_id, pmid)
    );
    CREATE INDEX relation_pmids_pmid ON relation_pmids(pmid);

    CREATE TABLE entities (
        key TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL
    );

    CREATE TABLE synonyms (
        entity_key TEXT NOT NULL REFERENCES entities(key),
        synonym TEXT NOT NULL,
        source TEXT NOT NULL,
        PRIMARY KEY (entity_key, synonym)
    );

    CREATE TABLE citations (
        citing TEXT NOT NULL,
        cited TEXT NOT NULL,
        PRIMARY KEY (citing, cited)
    ) WITHOUT ROWID;
    CREATE INDEX citations_cited ON citations(cited);

    CREATE TABLE mesh_tree (
        tree_number TEXT PRIMARY KEY,
        term TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX mesh_tree_term ON mesh_tree(term);

    CREATE TABLE labels (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        user TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        query_text TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        grade TEXT NOT NULL CHECK (grade IN ('complete', 'partial', 'irrelevant', 'skip')),
        note TEXT NOT NULL DEFAULT '',
        model_version TEXT NOT NULL DEFAULT '',
        train_size INTEGER,
        superseded_by INTEGER REFERENCES labels(id)
    );
    CREATE INDEX labels_query ON labels(schema, query_key, doc_id);
    CREATE INDEX labels_user ON labels(user);

    CREATE TABLE models (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        recipe TEXT NOT NULL DEFAULT '',
        base_model TEXT NOT NULL DEFAULT '',
        path TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'registered',
        metrics TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        UNIQUE (name, version)
    );

    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
        progress REAL NOT NULL DEFAULT 0,
        message TEXT NOT NULL DEFAULT '',
        params TEXT NOT NULL DEFAULT '{}',
        result TEXT NOT NULL DEFAULT '{}',
        error TEXT NOT NULL DEFAULT '',
        created_by TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );

    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        ts TEXT NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        object_type TEXT NOT NULL,
        object_id TEXT NOT NULL,
        before TEXT,
        after TEXT
    );
    CREATE INDEX audit_object ON audit_log(object_type, object_id);

    CREATE TABLE imports (
        id INTEGER PRIMARY KEY,
        ts TEXT NOT NULL,
        actor TEXT NOT NULL,
        kind TEXT NOT NULL,
        reader TEXT NOT NULL,
        path TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        added INTEGER NOT NULL,
        updated INTEGER NOT NULL,
        unchanged INTEGER NOT NULL
    );
    """,
    # 1 -> 2: the worker process of a job, so a job whose worker died is reported as failed
    """
    ALTER TABLE jobs ADD COLUMN pid INTEGER;
    CREATE INDEX jobs_status ON jobs(status)
    """,
    # 2 -> 3: source suggestions a curator confirmed in the app (PMID + relation + comment),
    # exported for a KB's submission queue (CIViC source suggestions)
    """
    CREATE TABLE source_suggestions (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        confirmed_by TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        pmid TEXT NOT NULL,
        slots TEXT NOT NULL DEFAULT '{}',
        answer TEXT NOT NULL,
        answer_key TEXT NOT NULL DEFAULT '',
        comment TEXT NOT NULL,
        UNIQUE (schema, query_key, pmid, answer_key, answer)
    );
    CREATE INDEX source_suggestions_query ON source_suggestions(schema, query_key)
    """,
    # 3 -> 4: model registry (curation/store/models.py): schema, who registered it, the training
    # manifest, the sha256 of model.safetensors; at most one active version per schema
    """
    ALTER TABLE models ADD COLUMN schema TEXT NOT NULL DEFAULT '';
    ALTER TABLE models ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE models ADD COLUMN manifest TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE models ADD COLUMN sha256 TEXT NOT NULL DEFAULT '';
    CREATE UNIQUE INDEX models_one_active ON models(schema) WHERE status = 'active'
    """,
    # 4 -> 5: imports commit in short batches (curation/store/import_log.py). An import is
    # 'running' (with its process id) until its last batch; the rows it inserts carry its id and
    # the rows it changes keep a before image in import_undo, so a failed or killed import is
    # rolled back completely
    """
    ALTER TABLE imports ADD COLUMN status TEXT NOT NULL DEFAULT 'done';
    ALTER TABLE imports ADD COLUMN pid INTEGER;
    ALTER TABLE documents ADD COLUMN import_id INTEGER;
    ALTER TABLE relations ADD COLUMN import_id INTEGER;
    ALTER TABLE entities ADD COLUMN import_id INTEGER;
    ALTER TABLE synonyms ADD COLUMN import_id INTEGER;
    ALTER TABLE citations ADD COLUMN import_id INTEGER;
    ALTER TABLE mesh_tree ADD COLUMN import_id INTEGER;
    ALTER TABLE audit_log ADD COLUMN import_id INTEGER;
    CREATE INDEX documents_import ON documents(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX relations_import ON relations(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX entities_import ON entities(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX synonyms_import ON synonyms(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX citations_import ON citations(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX mesh_tree_import ON mesh_tree(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX audit_log_import ON audit_log(import_id) WHERE import_id IS NOT NULL;
    CREATE INDEX imports_status ON imports(status);
    CREATE TABLE import_undo (
        seq INTEGER PRIMARY KEY,
        import_id INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('document', 'annotations', 'relation')),
        key TEXT NOT NULL,
        before TEXT NOT NULL
    );
    CREATE INDEX import_undo_import ON import_undo(import_id, seq)
    """,
    # 6: label ids are never reused. An undo deletes the newest label, and with a plain INTEGER
    # PRIMARY KEY the next label took its id, so audit rows of one id named different PMIDs.
    # AUTOINCREMENT needs a rebuilt table; the sequence starts above every id a label or an
    # audit row (undone labels included) ever had.
    """
    CREATE TABLE labels_v6 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        user TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        query_text TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        grade TEXT NOT NULL CHECK (grade IN ('complete', 'partial', 'irrelevant', 'skip')),
        note TEXT NOT NULL DEFAULT '',
        model_version TEXT NOT NULL DEFAULT '',
        train_size INTEGER,
        superseded_by INTEGER REFERENCES labels_v6(id)  -- the rename makes it labels(id)
    );
    INSERT INTO labels_v6(id, created_at, user, schema, query_key, query_text, doc_id, grade,
                          note, model_version, train_size, superseded_by)
        SELECT id, created_at, user, schema, query_key, query_text, doc_id, grade, note,
               model_version, train_size, superseded_by FROM labels;
    DROP TABLE labels;
    ALTER TABLE labels_v6 RENAME TO labels;
    CREATE INDEX labels_query ON labels(schema, query_key, doc_id);
    CREATE INDEX labels_user ON labels(user);
    DELETE FROM sqlite_sequence WHERE name IN ('labels', 'labels_v6');
    INSERT INTO sqlite_sequence(name, seq)
        SELECT 'labels', MAX(m) FROM (
            SELECT COALESCE(MAX(id), 0) AS m FROM labels
            UNION ALL
            SELECT COALESCE(MAX(CAST(object_id AS INTEGER)), 0) FROM audit_log
            WHERE object_type = 'label' AND object_id GLOB '[0-9]*')
    """,
    # 7: the curator's day. Browser sign-ins that survive a reload (the cookie holds a signed
    # random id; only its sha256 is stored, so a leaked database signs nobody in, and sign-out
    # revokes the row); moderation of source suggestions (new -> accepted / rejected, with who,
    # when and why); adjudicated final grades for items two annotators graded differently
    # (a newer decision supersedes an older one, none is deleted).
    """
    CREATE TABLE web_sessions (
        id_hash TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        mode TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        revoked_at TEXT
    );
    CREATE INDEX web_sessions_user ON web_sessions(user);
    ALTER TABLE source_suggestions ADD COLUMN status TEXT NOT NULL DEFAULT 'new'
        CHECK (status IN ('new', 'accepted', 'rejected'));
    ALTER TABLE source_suggestions ADD COLUMN reviewed_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE source_suggestions ADD COLUMN reviewed_at TEXT;
    ALTER TABLE source_suggestions ADD COLUMN review_reason TEXT NOT NULL DEFAULT '';
    CREATE TABLE adjudications (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        user TEXT NOT NULL,
        schema TEXT NOT NULL,
        query_key TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        grade TEXT NOT NULL CHECK (grade IN ('complete', 'partial', 'irrelevant')),
        reason TEXT NOT NULL DEFAULT '',
        superseded_by INTEGER REFERENCES adjudications(id)
    );
    CREATE INDEX adjudications_item ON adjudications(schema, query_key, doc_id)
    """,
    # 7 -> 8: an import records the machine it runs on and the time of its last batch, so that
    # with a shared database (PostgreSQL) a process on another machine never takes a running
    # import for a dead one (curation/store/import_log.py)
    """
    ALTER TABLE imports ADD COLUMN host TEXT NOT NULL DEFAULT '';
    ALTER TABLE imports ADD COLUMN beat TEXT
    """,
    # 8 -> 9: a label references the dense model version that ranked its abstract (typed
    # identities, issue 27); the text column stays as written. Workspace.migrate links the older
    # rows whose text names a registered version (curation/store/label_versions.py).
    """
    ALTER TABLE labels ADD COLUMN model_version_id INTEGER REFERENCES models(id)
    """,
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
]

#: Schema version this code writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)
