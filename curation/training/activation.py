"""Switching a schema's active dense version: build the version's index, then activate it.

:func:`switch_active` is what the gate (a retraining round) and :func:`promote` (an admin, with a
written reason) call; the registry change is one transaction made only once the index is complete
on disk, so a search never sees a version without its index.
"""

from __future__ import annotations

from curation.access.users import User, require_admin
from curation.store.models import ModelVersion, activate_model, get_model
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def switch_active(ws: Workspace, ident: str, *, user: User, reason: str,
                  build_index: bool = True) -> ModelVersion:
    """Build the version's dense index (from cached embeddings when present), then activate it.

    The index is complete on disk before the registry changes, and the activation is one
    transaction: a search that resolves the active version gets a version whose index exists.
    """
    from curation.search.indexing import get_index

    version = get_model(ws, ident)
    if build_index:
        get_index(ws, "dense", {"model": version.id}, progress=False)
    return activate_model(ws, version.id, user, reason=reason)


def promote(ws: Workspace, ident: str, *, user: User | None, reason: str) -> ModelVersion:
    """An admin promotes a version the gate refused (or rolls back to an older one).

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No written reason.
    """
    require_admin(user, "Promoting a model version")
    if not reason.strip():
        raise CurationError("Promoting a model version needs a written reason (it is audited)")
    assert user is not None
    return switch_active(ws, ident, user=user, reason=reason.strip())
