"""Which model version ranked a labelled abstract, as a reference, and how many labels it had
learned from (issue 27 item 3; ASReview records the same as ``training_set``).

A label row keeps the text the app or the simulation wrote (``model_version``: a hit's
retriever label such as ``dense:disease_gene-edel@2:ab12cd34ef56+rerank``, a menu entry such as
``ranked · disease_gene-ranker@3``, or a plain ``disease_gene-edel@2``) and, since schema version
9, ``model_version_id``: the ``models`` row of the dense version named in it, or NULL when it
names none (BM25, the packaged model, a ranker version, which lives in ``WS/rankers``, or a
version since deleted). Older rows are linked when the workspace migrates; their text is kept
verbatim either way.

``train_size`` is the number of curator labels the ranking version had learned from (0 for
BM25 and for versions trained on the KB alone), read from the version's manifest.
"""

from __future__ import annotations

import logging
from pathlib import Path

from curation.store.database import StoreConnection
from curation.store.identities import ModelVersionId
from kb_sources.errors import InputFormatError
from kb_sources.json_text import read_json

logger = logging.getLogger(__name__)

__all__ = ["labels_learned", "link_label_versions", "version_row_id"]


def version_row_id(conn: StoreConnection, model_version: str | None) -> int | None:
    """The ``models`` row id of the dense version named in ``model_version``, or None."""
    version = ModelVersionId.find(model_version)
    if version is None or version.is_ranker:
        return None
    row = conn.execute("SELECT id FROM models WHERE name = ? AND version = ?",
                       (version.name, str(version.n))).fetchone()
    return None if row is None else int(row[0])


def link_label_versions(conn: StoreConnection) -> int:
    """Fill ``model_version_id`` of label rows whose text names a registered version (inside
    the caller's transaction); returns how many rows were linked. Rows naming none keep NULL."""
    rows = conn.execute("SELECT DISTINCT model_version FROM labels WHERE model_version <> '' "
                        "AND model_version_id IS NULL").fetchall()
    linked = 0
    for (text,) in rows:
        row_id = version_row_id(conn, text)
        if row_id is not None:
            cur = conn.execute("UPDATE labels SET model_version_id = ? WHERE model_version = ? "
                               "AND model_version_id IS NULL", (row_id, text))
            linked += max(int(cur.rowcount or 0), 0)
    if linked:
        logger.info("linked %d label row(s) to their model version", linked)
    return linked


def labels_learned(root: Path, model_version: str | None) -> int | None:
    """How many curator labels the version named in ``model_version`` learned from: 0 when it
    names no trained version (BM25, the packaged model), the count its manifest records
    otherwise, None when that manifest cannot be read."""
    version = ModelVersionId.find(model_version)
    if version is None:
        return 0
    folder = "rankers" if version.is_ranker else "models"
    path = Path(root) / folder / str(version) / "manifest.json"
    try:
        manifest = read_json(path, expected="a version manifest", fix="restore its manifest.json")
    except (OSError, InputFormatError):
        logger.debug("no readable manifest for %s at %s", version, path)
        return None
    if not isinstance(manifest, dict):
        return None
    if version.is_ranker:
        used = manifest.get("labels_used") or []
    else:
        used = (manifest.get("examples") or {}).get("labels", {}).get("used") or []
    return len(used) if isinstance(used, list) else None
