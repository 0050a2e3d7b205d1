"""One retraining round of the feedback loop: labels + KB -> candidate -> gate -> atomic switch.

:func:`retrain`:

1. builds the schema's EDEL examples from the KB (train split) and adds the current labels
   (:mod:`curation.training.feedback`; labels on dev/test queries are held out);
2. trains a new version, warm-started from the active version (or from the base model), with
   checkpoints per epoch (an interrupted round resumes; a cancelled job stops at the next step);
3. scores the candidate and the active version on the **test** split (the same metrics as
   ``kbcurate evaluate``, full corpus by default) and asks the gate (:mod:`curation.training.gate`);
4. when the gate passes, the candidate's index is built first (evaluation already encoded the
   corpus into the embedding cache) and then the candidate is activated in one transaction, so a
   search sees the old model and index or the new ones, never a mix (a search resolves the active
   version once and loads that version's own index).

The active version is never touched before step 4; a crash anywhere leaves it serving.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from curation.access.users import USERS_FILE, Role, User, UserStore, require_admin
from curation.evaluation.harness import EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import (
    ModelVersion,
    active_model,
    list_models,
    update_metrics,
)
from curation.store.workspace import Workspace
from curation.training.activation import promote, switch_active  # noqa: F401 (re-exported)
from curation.training.edel import EdelOptions, edel_options, train_edel
from curation.training.examples import build_examples
from curation.training.feedback import (
    LabelMapping,
    current_labels,
    label_examples,
    merge_examples,
)
from curation.training.gate import GateDecision, decide
from curation.training.margins import margin_table
from curation.training.pool import build_pool, score_model
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
#: How candidates are scored: the whole corpus (the gate's default) or a pool (simulation).
EVALUATIONS = ("corpus", "pool")
#: The test pool of ``evaluation="pool"``: test gold + BM25 top 30 per query + 500 random.
TEST_POOL_DEPTH, TEST_POOL_RANDOM = 30, 500


@dataclass(frozen=True)
class RetrainOptions:
    """Options of a retraining round.

    Attributes:
        edel: The EDEL options (epochs, caps, ...); ``edel.base`` is used when there is no
            active version or ``warm_start`` is False.
        warm_start: Start from the active version's weights.
        tolerance_pp: The gate's allowed drop per metric (percentage points).
        promote: Activate the candidate when the gate passes (False: only report).
        mapping: Margins of labelled examples.
        evaluation: "corpus" (every document, as ``kbcurate evaluate``) or "pool" (test gold +
            BM25 top 30 per query + 500 random documents; the simulation's cheap default; a
            version already scored on the same pool is not scored again).
        build_index: Build the promoted version's dense index before the switch (the
            simulation, which never searches its copy, turns it off).
    """

    edel: EdelOptions = field(default_factory=EdelOptions)
    warm_start: bool = True
    tolerance_pp: float = 0.5
    promote: bool = True
    mapping: LabelMapping = field(default_factory=LabelMapping)
    evaluation: str = "corpus"
    build_index: bool = True

    def __post_init__(self) -> None:
        if self.evaluation not in EVALUATIONS:
            raise CurationError(f"Unknown evaluation {self.evaluation!r}. Available options: "
                                f"{', '.join(EVALUATIONS)}")
        if self.tolerance_pp < 0:
            raise CurationError(f"tolerance_pp must be >= 0, got {self.tolerance_pp}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetrainOptions:
        """Options from plain values (a job's params); unknown names are clear errors."""
        known = {"edel", "warm_start", "tolerance_pp", "promote", "mapping", "evaluation",
                 "build_index"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CurationError(f"Unknown retraining option(s) {', '.join(unknown)}. Available "
                                f"options: {', '.join(sorted(known))}")
        values = dict(data)
        values["edel"] = edel_options(dict(values.get("edel") or {}))
        values["mapping"] = LabelMapping(**dict(values.get("mapping") or {}))
        return cls(**values)


@dataclass(frozen=True)
class RetrainResult:
    """What a round produced."""

    version: ModelVersion
    previous: str | None
    decision: GateDecision
    promoted: bool
    labels_used: int


def roles_of(ws: Workspace) -> dict[str, Role]:
    """User -> role from the workspace's users file (empty when there is none)."""
    path = ws.root / USERS_FILE
    if not path.is_file():
        return {}
    return {u.name: u.role for u in UserStore(path).users()}


def retrain(ws: Workspace, schema: str, options: RetrainOptions | None = None, *,
            actor: str, user: User | None = None, progress: bool = True,
            report: Report | None = None, roles: Mapping[str, Role] | None = None,
            task: EvalTask | None = None) -> RetrainResult:
    """One round (see the module docstring).

    Args:
        actor: Who starts it (``created_by`` and the audit).
        user: When given, must be an admin (the app's path); the CLI passes None (local admin).
        roles: User -> role for label conflicts (default: the workspace's users file).
        task: The schema's split (built when None).

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: No training data, or training/evaluation failed.
    """
    if user is not None:
        require_admin(user, "Retraining a model")
    options = options or RetrainOptions()
    sch = get_schema(schema, ws.schemas())
    task = task or build_task(ws, sch.name, seed=options.edel.example_config().split_seed)
    matcher = EntityMatcher()
    active = active_model(ws, sch.name)
    edel = options.edel
    if options.warm_start and active is not None:
        edel = replace(edel, base=active.id)
    _say(report, 0.01, "building KB examples and reading labels")
    kb = build_examples(ws, sch.name, edel.example_config(), matcher=matcher, task=task,
                        progress=progress and not report)
    labels = current_labels(ws, sch.name)
    made = label_examples(ws, sch, task, margin_table(sch, ws.root), labels,
                          roles=roles if roles is not None else roles_of(ws),
                          mapping=options.mapping,
                          document_format=kb.manifest["config"]["document_format"],
                          matcher=matcher)
    examples = merge_examples(kb, made, {"last_label_id": max((lb.id for lb in labels),
                                                               default=0)})
    sub = _sub_report(report, 0.02, 0.75)
    extra = {"round": "retrain", "parent": active.id if active else None,
             "warm_start": edel.base if active and options.warm_start else None,
             "retrain_options": options.to_json()}
    version = train_edel(ws, sch.name, edel, actor=actor, progress=progress, report=sub,
                         examples=examples, extra_manifest=extra)
    _say(report, 0.78, f"evaluating {version.id} beside the active version on the test split")
    if task.split("test"):
        scores = evaluate_pair(ws, task, version, active, options, matcher, progress=progress)
        decision = decide(scores["candidate"], scores.get("active"),
                          tolerance_pp=options.tolerance_pp)
        metrics = _prefixed(ws, scores["candidate"], options)
    else:
        decision = GateDecision(False, (f"{sch.name} has no held-out (test split) query with a "
                                        "cited abstract in the workspace, so the gate cannot "
                                        "compare; kept as a candidate",), {}, {})
        metrics = {}
    version = update_metrics(ws, version.id, {**metrics, "gate": decision.to_json()},
                             actor=actor)
    promoted = False
    if decision.promote and options.promote:
        _say(report, 0.9, f"building the index of {version.id} before the switch")
        # the gate promotes for whoever started the round: a signed-in admin (checked above),
        # or the CLI / an admin-only job, which act as admins
        version = switch_active(ws, version.id, user=user or User(actor, Role.ADMIN),
                                reason="gate: " + "; ".join(decision.reasons),
                                build_index=options.build_index)
        promoted = True
    _say(report, 1.0, f"{version.id}: {decision.reasons[-1]}")
    return RetrainResult(version, active.id if active else None, decision, promoted,
                         len(made.used))


def evaluate_pair(ws: Workspace, task: EvalTask, candidate: ModelVersion,
                  active: ModelVersion | None, options: RetrainOptions,
                  matcher: EntityMatcher, *, progress: bool = False) -> dict[str, dict[str, float]]:
    """Test-split metrics of the candidate and (when there is one) the active version."""
    out: dict[str, dict[str, float]] = {}
    pairs = [("candidate", candidate)] + ([("active", active)] if active is not None else [])
    if options.evaluation == "pool":
        fmt = candidate.manifest.get("document_format", "{title} {abstract}")
        spec = pool_spec(ws, options.edel.seed)
        pool = build_pool(ws, task.split("test"), fmt, depth=TEST_POOL_DEPTH,
                          n_random=TEST_POOL_RANDOM, seed=options.edel.seed)
        for role, v in pairs:
            if v.metrics.get("testpool_spec") == spec:  # scored on this very pool before
                out[role] = {k.removeprefix("testpool_"): float(x) for k, x in v.metrics.items()
                             if k.startswith("testpool_") and k != "testpool_spec"}
                continue
            out[role] = score_model(v.model_dir, pool, matcher=matcher, name=v.id,
                                    max_seq_length=int(v.manifest.get("max_seq_length", 128)))
        return out
    from curation.evaluation.runner import evaluate_workspace

    for role, v in pairs:
        result = evaluate_workspace(ws, task.schema, ["dense"], split="test",
                                    options={"dense": {"model": v.id}}, progress=progress)
        out[role] = dict(result["retrievers"]["dense"])
    return out


def pool_spec(ws: Workspace, seed: int) -> str:
    """Identity of the test pool: its sizes, seed and the corpus it was drawn from."""
    from curation.search.indexing import corpus_fingerprint

    return (f"test+bm25@{TEST_POOL_DEPTH}+random{TEST_POOL_RANDOM}/seed{seed}/"
            f"{corpus_fingerprint(ws)[:16]}")


def labels_since_active(ws: Workspace, schema: str) -> dict[str, int]:
    """Current labels per grade given after the active version's training data was read."""
    active = active_model(ws, schema)
    last = 0
    if active is not None:
        last = int(active.manifest.get("examples", {}).get("labels", {})
                   .get("last_label_id", 0) or 0)
    counts: dict[str, int] = {}
    for lb in current_labels(ws, schema, after_id=last):
        counts[lb.grade.value] = counts.get(lb.grade.value, 0) + 1
    return counts


def history(ws: Workspace, schema: str) -> list[dict[str, Any]]:
    """The schema's versions, oldest first, with test metrics, labels used and promotions."""
    audits = [a for a in ws.audit_log("model", limit=10_000) if a["action"] == "activate"]
    rows = []
    for v in sorted(list_models(ws, schema=schema), key=lambda v: v.version):
        labels = v.manifest.get("examples", {}).get("labels", {})
        promotions = [a for a in audits if a["object_id"] == v.id]
        last = promotions[0] if promotions else None
        rows.append({
            "version": v.id, "status": v.status.value, "created_at": v.created_at,
            "created_by": v.created_by, "parent": v.manifest.get("parent"),
            "labels_used": len(labels.get("used", [])),
            "ndcg@10": v.metrics.get("test_ndcg@10", v.metrics.get("testpool_ndcg@10")),
            "entity_recall@10": v.metrics.get("test_entity_recall@10",
                                              v.metrics.get("testpool_entity_recall@10")),
            "promoted_by": last["actor"] if last else "",
            "promoted_at": last["ts"] if last else "",
            "reason": _reason(last),
            "gate": (v.metrics.get("gate") or {}).get("reasons", []),
        })
    return rows


def _reason(audit: Mapping[str, Any] | None) -> str:
    if not audit or not audit.get("after"):
        return ""
    try:
        after = json.loads(audit["after"])
    except (TypeError, ValueError):
        return ""
    return str(after.get("reason", "")) if isinstance(after, dict) else ""


def _prefixed(ws: Workspace, metrics: Mapping[str, float], options: RetrainOptions
              ) -> dict[str, Any]:
    if options.evaluation == "corpus":
        return {"test_" + k: v for k, v in metrics.items()}
    return {**{"testpool_" + k: v for k, v in metrics.items()},
            "testpool_spec": pool_spec(ws, options.edel.seed)}


def _say(report: Report | None, fraction: float, message: str) -> None:
    logger.info(message)
    if report:
        report(fraction, message)


def _sub_report(report: Report | None, start: float, end: float) -> Report | None:
    if report is None:
        return None
    return lambda f, m: report(start + (end - start) * f, m)
