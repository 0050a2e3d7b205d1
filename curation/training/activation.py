"""Switching a schema's active dense version: build the version's indexes, then activate it.

Encoding the whole corpus with a new version takes minutes, so activating is a background job
(kind ``activate``): :func:`start_activation` checks the admin role and the written reason,
queues the job and returns at once; the job (:func:`run_activation`) builds the version's dense
index and its hybrid index (BM25 + dense, saved as its own folder; its dense vectors come from the
embedding cache the dense build just filled), reporting "building the index of V: N of M
documents", and only then activates the version in one transaction. Until that moment the old
version stays active, and a cancelled or failed job leaves it so: a search that resolves "dense ·
active" or "hybrid · active" always gets a version whose indexes exist.

:func:`switch_active` is the same switch in the caller's process (the gate of a retraining round,
which already runs in a job; the CLI, with progress bars); :func:`promote` is an admin's switch by
hand (with a written reason). A cross-encoder version (:mod:`curation.training.cross_versions`)
has no index: switching to it sets the schema's active cross-encoder at once, and never touches
the active dense version. Dense encoders run on the workspace's measured default backend
(:func:`curation.search.indexing.default_backend`, set by ``kbcurate bench --backends
--set-default``); the build reports documents per second.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from curation.access.users import Role, User, require_admin
from curation.jobs.queue import Job, get_job, list_jobs, submit_job
from curation.search.indexing import (
    default_backend,
    get_index,
    index_ready,
    with_workspace_defaults,
)
from curation.search.session import corpus_counts
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.cache import EmbeddingCache
from retrievers.registry import build_retriever

logger = logging.getLogger(__name__)

#: The job kind (:data:`curation.jobs.kinds.JOB_KINDS`).
ACTIVATE = "activate"
#: Share of the job's progress bar given to the dense index (the encoding); the hybrid index,
#: whose vectors come from the cache, gets most of the rest.
DENSE_SHARE = 0.9

#: Seconds between two progress writes of a job (each is a transaction on the jobs table).
REPORT_EVERY_S = 1.0

#: The ``backend`` of a cross-encoder's :class:`IndexBuild`: it has no index.
NO_INDEX = "cross-encoder (no index)"

#: ``fn(stage, done, total)``: stage "dense" or "hybrid", ``done`` of ``total`` documents.
StageProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class IndexBuild:
    """What building a version's indexes took.

    Attributes:
        version: The version id.
        documents: Documents in the index.
        encoded: Texts encoded by this build (the others came from the embedding cache; a text
            that several documents share is encoded once).
        backend: The encoding backend/precision ("torch/fp32", "openvino/int8").
        dense_s: Seconds to build (or load) the dense index, loading the model included.
        hybrid_s: Seconds to build (or load) the hybrid index (0 when not built).
        reused: The dense index was already built for the current documents (loaded).
    """

    version: str
    documents: int
    encoded: int
    backend: str
    dense_s: float
    hybrid_s: float
    reused: bool = False

    @property
    def docs_per_s(self) -> float | None:
        """Documents indexed per second of the dense build (the model's loading and the
        vector index included); None when nothing was encoded (cached vectors, or the index was
        already built)."""
        return self.documents / self.dense_s if self.encoded and self.dense_s > 0 else None

    def summary(self) -> str:
        """One line: "built the index of V: 12,471 documents (12,471 encoded, torch/fp32) in
        412 s: 30.3 documents/s"."""
        if self.backend == NO_INDEX:
            return f"{self.version} is a cross-encoder: it re-ranks, no index to build"
        if self.reused:
            return (f"the index of {self.version} ({self.documents:,} documents, "
                    f"{self.backend}) was already built; ready in "
                    f"{self.dense_s + self.hybrid_s:.0f} s")
        rate = (f"{self.docs_per_s:.1f} documents/s" if self.docs_per_s is not None
                else "every vector came from the embedding cache")
        return (f"built the index of {self.version}: {self.documents:,} documents "
                f"({self.encoded:,} encoded, {self.backend}) in "
                f"{self.dense_s + self.hybrid_s:.0f} s: {rate}")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "docs_per_s": (round(self.docs_per_s, 2)
                                               if self.docs_per_s is not None else None),
                "seconds": round(self.dense_s + self.hybrid_s, 2)}


def _cached_vectors(ws: Workspace, options: dict[str, Any]) -> int:
    """Vectors the embedding cache holds for the dense retriever of ``options`` (no model
    is loaded: the encoder is lazy)."""
    opts = with_workspace_defaults(ws, "dense", options)
    opts.pop("document_format", None)
    retriever = build_retriever("dense", **opts)
    cache_dir = getattr(retriever, "cache_dir", None)
    if cache_dir is None:
        return 0
    return len(EmbeddingCache(cache_dir, retriever.encoder.model_id))


def build_version_indexes(ws: Workspace, ident: str, *, on_progress: StageProgress | None = None,
                          hybrid: bool = True) -> IndexBuild:
    """Build (or load, when current) the dense and hybrid indexes of a model version.

    Args:
        ws: The workspace.
        ident: The version id ("disease_gene-edel@2").
        on_progress: Called as ``fn(stage, done, total)`` while documents are encoded/indexed.
        hybrid: Also build the hybrid (BM25 + dense) index.

    Raises:
        UnknownNameError: No such version.
        CurationError: Its weights do not match the recorded checksum.
    """
    version = Models(ws).get(ident)
    options = {"model": version.id}
    before = _cached_vectors(ws, options)
    reused = index_ready(ws, "dense", options)

    def stage(name: str) -> Callable[[int, int], None] | bool:
        if on_progress is None:
            return False
        return lambda done, total: on_progress(name, done, total)

    started = time.monotonic()
    index = get_index(ws, "dense", options, progress=stage("dense"))
    dense_s = time.monotonic() - started
    encoded = max(_cached_vectors(ws, options) - before, 0)
    hybrid_s = 0.0
    if hybrid:
        started = time.monotonic()
        get_index(ws, "hybrid", {"dense": options}, progress=stage("hybrid"))
        hybrid_s = time.monotonic() - started
    build = IndexBuild(version.id, len(index), encoded, "/".join(default_backend(ws)),
                       round(dense_s, 2), round(hybrid_s, 2), reused)
    logger.info("%s", build.summary())
    return build


def build_and_activate(ws: Workspace, ident: str, *, user: User, reason: str,
                       on_progress: StageProgress | None = None,
                       before_switch: Callable[[], None] | None = None
                       ) -> tuple[ModelVersion, IndexBuild]:
    """Build the version's dense and hybrid indexes, then activate it in one transaction.

    Args:
        before_switch: Called between the build and the switch (a job checks it was not
            cancelled meanwhile: raising there activates nothing).

    Returns:
        (the active version, what the build took; nothing for a cross-encoder).
    """
    from curation.training.cross_versions import activate_cross, is_cross

    target = Models(ws).get(ident)
    if is_cross(target):  # it re-ranks: no index to build
        if before_switch is not None:
            before_switch()
        return (activate_cross(ws, target.id, user=user, reason=reason),
                IndexBuild(target.id, 0, 0, NO_INDEX, 0.0, 0.0, True))
    build = build_version_indexes(ws, ident, on_progress=on_progress)
    if before_switch is not None:
        before_switch()
    return Models(ws).activate(build.version, user, reason=reason), build


def switch_active(ws: Workspace, ident: str, *, user: User, reason: str,
                  build_index: bool = True,
                  on_progress: StageProgress | None = None) -> ModelVersion:
    """Build the version's dense and hybrid indexes, then activate it (in this process).

    The indexes are complete on disk before the registry changes, and the activation is one
    transaction: a search that resolves the active version gets a version whose indexes exist.
    Long: a request calls :func:`start_activation` instead.
    """
    from curation.training.cross_versions import activate_cross, is_cross

    if is_cross(Models(ws).get(ident)):
        return activate_cross(ws, ident, user=user, reason=reason)
    if not build_index:
        return Models(ws).activate(Models(ws).get(ident).id, user, reason=reason)
    return build_and_activate(ws, ident, user=user, reason=reason, on_progress=on_progress)[0]


def check_promotion(user: User | None, reason: str,
                    action: str = "Promoting a model version") -> tuple[User, str]:
    """(the admin, the stripped reason) of an activation by hand.

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No written reason.
    """
    require_admin(user, action)
    assert user is not None
    if not reason.strip():
        raise CurationError(f"{action} needs a written reason (it is audited); say why, e.g. "
                            "'spot checks on 20 queries look better'")
    return user, reason.strip()


def promote(ws: Workspace, ident: str, *, user: User | None, reason: str,
            on_progress: StageProgress | None = None) -> ModelVersion:
    """An admin promotes a version the gate refused (or rolls back to an older one), here and
    now (the CLI; the app queues :func:`start_activation`).

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No written reason.
    """
    user, reason = check_promotion(user, reason)
    return switch_active(ws, ident, user=user, reason=reason, on_progress=on_progress)


# -- the background job ---------------------------------------------------------------------------
def unfinished_activation(ws: Workspace, schema: str) -> Job | None:
    """The newest queued or running activation job of ``schema``, if any."""
    for job in list_jobs(ws, ACTIVATE, limit=50):
        if job.params.get("schema") == schema and not job.finished:
            return job
    return None


def start_activation(ws: Workspace, user: User | None, version: str, reason: str, *,
                     start: bool = True) -> Job:
    """Queue the activation of ``version`` and return at once (or the schema's unfinished one).

    The job builds the version's indexes with progress, then activates it; the old version stays
    active until then.

    Args:
        ws: The workspace.
        user: The signed-in user (must be an admin; checked here, before anything is queued).
        version: The version id.
        reason: Why (audited; required).
        start: Hand the job to a worker (tests pass False and run it in-process).

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No written reason.
        UnknownNameError: No such version.
    """
    user, reason = check_promotion(user, reason, "Activating a model version")
    target = Models(ws).get(version)
    running = unfinished_activation(ws, target.schema)
    if running is not None:
        logger.info("activation of %s not queued: job %d (%s) is unfinished", target.id,
                    running.id, running.params.get("version"))
        return running
    return submit_job(ws, ACTIVATE, {"schema": target.schema, "version": target.id,
                                     "reason": reason}, user=user, start=start)


def check_activation_params(ws: Workspace, params: dict[str, Any]) -> None:
    """Validator of the ``activate`` job kind.

    Raises:
        UnknownNameError: No such version.
        CurationError: The version belongs to another schema, or no written reason.
    """
    version = Models(ws).get(str(params.get("version", "")))
    if params.get("schema") != version.schema:
        raise CurationError(f"Activation job: {version.id} is a version of {version.schema}, "
                            f"not of {params.get('schema')!r}; pass schema={version.schema!r}")
    if not str(params.get("reason", "")).strip():
        raise CurationError("Activation job: a written reason is required (it is audited)")


def progress_message(version: str, stage: str, done: int, total: int) -> str:
    """ "building the index of V: N of M documents" (the hybrid stage says so)."""
    what = "the hybrid index" if stage == "hybrid" else "the index"
    return f"building {what} of {version}: {done:,} of {total:,} documents"


def run_activation(ctx: Any, schema: str, version: str, reason: str) -> dict[str, Any]:
    """Worker entry point of an ``activate`` job: build the indexes, then switch."""
    ws = ctx.ws
    owner = _job_owner(ctx)
    previous = Models(ws).active(schema)
    documents = corpus_counts(ws)[0]
    ctx.progress(0.0, progress_message(version, "dense", 0, documents))
    shown, last = [0.0], [time.monotonic()]

    def report(stage: str, done: int, total: int) -> None:
        part = done / total if total else 1.0
        now = time.monotonic()
        if part < 1.0 and now - last[0] < REPORT_EVERY_S:  # BM25 counts every document
            return
        fraction = (DENSE_SHARE * part if stage == "dense"
                    else DENSE_SHARE + (0.99 - DENSE_SHARE) * part)
        shown[0], last[0] = max(shown[0], fraction), now  # the hybrid's two parts count up
        # duplicate texts are encoded once: count documents, not distinct texts
        ctx.progress(shown[0], progress_message(version, stage, round(documents * part),
                                                documents))

    active, build = build_and_activate(
        ws, version, user=User(owner, Role.ADMIN), reason=reason, on_progress=report,
        before_switch=lambda: ctx.progress(0.99, f"activating {version}"))  # cancelled: raises
    return {"version": active.id, "schema": active.schema,
            "previous": previous.id if previous else None, **build.to_json()}


def _job_owner(ctx: Any) -> str:
    return get_job(ctx.ws, ctx.job_id).created_by or "worker"
