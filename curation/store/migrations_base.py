"""The first nine migrations of the workspace database (schema versions 0 -> 9: the initial
schema up to typed label versions), kept apart so :mod:`curation.store.migrations` stays short.
Released: never edit them (see that module)."""

from __future__ import annotations

BASE_MIGRATIONS: list[str] = [
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
]
