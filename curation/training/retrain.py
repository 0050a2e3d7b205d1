"""One retraining round of the feedback loop: labels + KB -> candidate -> gate -> atomic switch.

:func:`retrain` reads the schema's current labels (:mod:`curation.training.feedback`: conflicts
resolved, final grades applied, labels of every split used; which ones is
:func:`curation.training.label_plan.plan_labels`'s decision) and runs one
:func:`curation.training.rounds.run_round` of **any recipe** (``RetrainOptions.recipe``), whose
``build_data`` makes the labels its own rows (EDEL: graded pairs; BiCA: positives and hard
negatives; BioHiCL: positive groups), warm-started from the active version (or from the base
model), with checkpoints per epoch (an interrupted round resumes; a cancelled job stops at the
next step). The round scores the candidate and the active version on the **test** split (without
the queries of groups either learned labels of: :mod:`curation.training.round_gate`) and asks
the gate; when it passes, the candidate's index is built first and then the candidate is
activated in one transaction, so a search sees the old model and index or the new ones.

The active version is never touched before the switch; a crash anywhere leaves it serving.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from curation.access.users import Role, User, require_admin
from curation.evaluation.harness import EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.store.audit import AuditEntry
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from curation.training.activation import promote, switch_active  # noqa: F401 (re-exported)
from curation.training.feedback import LabelMapping, current_labels, label_examples
from curation.training.gate import GateDecision
from curation.training.label_plan import (  # noqa: F401 (re-exported)
    NextRoundLabels,
    next_round_labels,
    roles_of,
)
from curation.training.recipes import options_class, recipe_options
from curation.training.recipes.edel.examples import DEFAULT_DOCUMENT_FORMAT
from curation.training.recipes.edel.margins import margin_table
from curation.training.rounds import GateSettings, run_round
from curation.training.scoring import (  # noqa: F401 (re-exported)
    EVALUATIONS,
    TEST_POOL_DEPTH,
    TEST_POOL_RANDOM,
    check_evaluation,
    pool_spec,
)
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


@dataclass(frozen=True)
class RetrainOptions:
    """Options of a retraining round.

    Attributes:
        recipe: The training recipe (``edel``, ``bica``, ``biohicl`` or a plug-in).
        training: The recipe's options (its defaults when None); ``training.base`` is used
            when there is no active version or ``warm_start`` is False.
        warm_start: Start from the active version's weights.
        tolerance_pp: The gate's allowed drop per metric (percentage points).
        promote: Activate the candidate when the gate passes (False: only report).
        mapping: Margins of labelled examples (EDEL).
        evaluation: "corpus" (every document, as ``kbcurate evaluate``) or "pool" (test gold +
            BM25 top 30 per query + 500 random documents; the simulation's cheap default).
        build_index: Build the promoted version's dense index before the switch (the
            simulation, which never searches its copy, turns it off).
        small_test_reason: An admin's written reason to let the gate promote on fewer than 20
            test queries (audited with the switch).
    """

    recipe: str = "edel"
    training: Any = None
    warm_start: bool = True
    tolerance_pp: float = 0.5
    promote: bool = True
    mapping: LabelMapping = field(default_factory=LabelMapping)
    evaluation: str = "corpus"
    build_index: bool = True
    small_test_reason: str = ""

    def __post_init__(self) -> None:
        check_evaluation(self.evaluation)
        if self.tolerance_pp < 0:
            raise CurationError(f"tolerance_pp must be >= 0, got {self.tolerance_pp}")
        cls = options_class(self.recipe)
        if self.training is None:
            object.__setattr__(self, "training", cls())
        elif not isinstance(self.training, cls):
            raise CurationError(f"RetrainOptions.training must be {self.recipe}'s "
                                f"{cls.__name__}, got {type(self.training).__name__}")
        self.training.validate()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["training"] = asdict(self.training)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetrainOptions:
        """Options from plain values (a job's params); unknown names are clear errors.

        ``{"edel": {...}}`` (the form before recipes were plug-ins) reads as recipe edel."""
        values = dict(data)
        if "edel" in values:
            values.setdefault("recipe", "edel")
            values.setdefault("training", values.pop("edel"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise CurationError(f"Unknown retraining option(s) {', '.join(unknown)}. Available "
                                f"options: {', '.join(sorted(known))}")
        recipe = values.get("recipe", "edel")
        values["training"] = recipe_options(recipe, dict(values.get("training") or {}))
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
    warnings: tuple[str, ...] = ()
    test_queries: int = 0  # the test queries the gate measured on


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
    task = task or build_task(ws, sch.name)
    from curation.training.measures import measure_for
    from curation.training.recipes import get_recipe

    # the recipe's own active version: a cross round warm-starts from the active cross-encoder
    active = measure_for(get_recipe(options.recipe)).active(ws, sch.name)
    training = options.training
    if options.warm_start and active is not None:
        training = replace(training, base=active.id)
    logger.info("reading the labels of %s", sch.name)
    labels = current_labels(ws, sch.name)
    made = label_examples(ws, sch, task, margin_table(sch, ws.root), labels,
                          roles=roles if roles is not None else roles_of(ws),
                          mapping=options.mapping, document_format=DEFAULT_DOCUMENT_FORMAT,
                          matcher=EntityMatcher())
    extra = {"round": "retrain", "parent": active.id if active else None,
             "warm_start": training.base if active and options.warm_start else None,
             "retrain_options": options.to_json()}
    gate = GateSettings(tolerance_pp=options.tolerance_pp, promote=options.promote,
                        build_index=options.build_index,
                        small_test_reason=options.small_test_reason, user=user)
    result = run_round(ws, sch.name, options.recipe, training, actor=actor, labels=made,
                       task=task, evaluation=options.evaluation, gate=gate,
                       extra_manifest=extra, progress=progress, report=report)
    return RetrainResult(result.version, result.previous, result.decision, result.promoted,
                         result.labels_used, result.warnings, result.test_queries)


def labels_since_active(ws: Workspace, schema: str) -> dict[str, int]:
    """Grade -> labels the next round will learn from that the active version did not
    (:func:`~curation.training.label_plan.next_round_labels`: the round's own selection)."""
    return next_round_labels(ws, schema).new


@dataclass(frozen=True)
class VersionHistory:
    """One dense version of a schema as ``kbcurate models history`` and the Models page show it.

    Attributes:
        version: Its id (``<schema>-<recipe>@<n>``).
        status: candidate, active or retired.
        parent: The version it was warm-started from, if any.
        labels_used: How many labels its training round took.
        ndcg_at_10: Held-out (test, else test pool) NDCG@10; None when never evaluated.
        entity_recall_at_10: Held-out EntityRecall@10; None when never evaluated.
        promoted_by: Who last activated it ("" if never).
        promoted_at: When (UTC, ISO 8601; "" if never).
        reason: The reason given then.
        gate: Why the promotion gate held it back (empty when it passed or never ran).
    """

    version: str
    status: str
    created_at: str
    created_by: str
    parent: str | None
    labels_used: int
    ndcg_at_10: float | None
    entity_recall_at_10: float | None
    promoted_by: str
    promoted_at: str
    reason: str
    gate: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The row as ``kbcurate models history --json`` prints it (metric keys as measured)."""
        names = {"ndcg_at_10": "ndcg@10", "entity_recall_at_10": "entity_recall@10"}
        out = {names.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}
        return {**out, "gate": list(self.gate)}


def history(ws: Workspace, schema: str) -> list[VersionHistory]:
    """The schema's versions, oldest first, with test metrics, labels used and promotions."""
    audits = [a for a in ws.audit_log("model", limit=10_000) if a.action == "activate"]
    rows = []
    for v in sorted(Models(ws).versions(schema=schema), key=lambda v: v.version):
        labels = v.manifest.get("examples", {}).get("labels", {})
        promotions = [a for a in audits if a.object_id == v.id]
        last = promotions[0] if promotions else None
        rows.append(VersionHistory(
            version=v.id, status=v.status.value, created_at=v.created_at,
            created_by=v.created_by, parent=v.manifest.get("parent"),
            labels_used=len(labels.get("used", [])),
            ndcg_at_10=v.metrics.get("test_ndcg@10", v.metrics.get("testpool_ndcg@10")),
            entity_recall_at_10=v.metrics.get("test_entity_recall@10",
                                              v.metrics.get("testpool_entity_recall@10")),
            promoted_by=last.actor if last else "",
            promoted_at=last.ts if last else "",
            reason=_reason(last),
            gate=tuple((v.metrics.get("gate") or {}).get("reasons", [])),
        ))
    return rows


def _reason(audit: AuditEntry | None) -> str:
    if audit is None or not audit.after:
        return ""
    try:
        after = audit.after_value()
    except ValueError:
        return ""
    return str(after.get("reason", "")) if isinstance(after, dict) else ""


