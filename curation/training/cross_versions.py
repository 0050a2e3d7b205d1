"""Cross-encoder versions in the registry: which versions are cross-encoders, and the schema's
active one.

A cross-encoder version (``<schema>-cross@n`` trained by the ``cross`` recipe, or an imported
cross-encoder) is a registry version like a dense one (weights checked, audited, exported), with
``"kind": "cross"`` in its manifest. It re-ranks a first stage's top K, so it never replaces the
schema's active **dense** version: its own active slot is a workspace setting
(``meta`` key :data:`ACTIVE_KEY`, ``cross_active:<schema>``), switched by :func:`activate_cross`
(admins only, audited like every switch). Its registry status stays ``candidate`` (or
``retired``), so ``Models.active`` keeps naming the dense version search encodes with.
The key, the kind and the reading of the active version are the store's
(:mod:`curation.store.cross_scores`), shared with the ranker's cross feature; activating one
queues its schema's scoring job (:func:`curation.search.cross_scores.after_cross_activation`).
"""

from __future__ import annotations

import logging
from typing import Any

from curation.access.users import require_admin
from curation.store.cross_scores import ACTIVE_KEY, CROSS_KIND, CrossScores, is_cross_version
from curation.store.models import Models, ModelVersion, verify_weights
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

__all__ = ["ACTIVE_KEY", "CROSS_KIND", "activate_cross", "active_cross", "is_cross"]

logger = logging.getLogger(__name__)

#: Whether ``version`` is a cross-encoder (manifest ``kind`` ``"cross"``).
is_cross = is_cross_version


def active_cross(ws: Workspace, schema: str) -> ModelVersion | None:
    """The schema's active cross-encoder version, or None (none set, or it is gone/retired)."""
    return CrossScores(ws).active_version(schema)


def activate_cross(ws: Workspace, ident: str, *, user: Any, reason: str = "",
                   start_scoring: bool = True) -> ModelVersion:
    """Make ``ident`` (a cross-encoder version) its schema's active cross-encoder.

    Nothing to build: a cross-encoder re-ranks, it has no index. The weights are verified first;
    the change is audited with the previous id and the reason; then the schema's scoring job
    (the ranker's cross feature) is queued, and handed to a worker with ``start_scoring``.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        UnknownNameError: No such version.
        CurationError: Not a cross-encoder version, or its weights changed.
    """
    require_admin(user, "Activating a cross-encoder version")
    version = Models(ws).get(ident)
    if not is_cross(version):
        raise CurationError(f"{version.id} is not a cross-encoder version (its manifest has no "
                            "kind 'cross'); activate a dense version with kbcurate models "
                            "activate, which builds its index")
    verify_weights(version)
    key = ACTIVE_KEY.format(schema=version.schema)
    with ws.transaction():
        previous = Settings(ws).value(key)
        if previous == version.id:
            return version
        Settings(ws).put(key, version.id)
        ws.audit(user.name, "activate", "model", version.id, before={key: previous},
                 after={key: version.id, "reason": reason})
    logger.info("activated cross-encoder %s for %s (previous: %s)", version.id, version.schema,
                previous)
    from curation.search.cross_scores import after_cross_activation

    after_cross_activation(ws, version.id, start=start_scoring)
    return version
