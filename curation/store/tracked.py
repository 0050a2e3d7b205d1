"""The tables whose inserted rows carry the ``import_id`` of the import that wrote them.

A leaf module: the import ledger (:mod:`curation.store.import_log`) rolls these tables back, and
the PostgreSQL store (:mod:`curation.store.postgres`) installs the triggers that stamp them.
"""

from __future__ import annotations

#: Tables whose inserted rows carry ``import_id``, with the columns that find one row (``rowid``:
#: SQLite's implicit one, a stand-in column on PostgreSQL). Children first: rolling back deletes
#: in this order.
TRACKED: dict[str, tuple[str, ...]] = {
    "audit_log": ("id",), "synonyms": ("rowid",), "relations": ("id",),
    "documents": ("rowid",), "citations": ("citing", "cited"), "mesh_tree": ("tree_number",),
    "entities": ("rowid",),
}
