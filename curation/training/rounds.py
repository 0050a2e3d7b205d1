"""One training round for every recipe: data -> train -> dev choice -> register -> test
metrics -> gate (-> switch).

:func:`run_round` is the only round there is: ``kbcurate train``, ``kbcurate retrain``, the
simulation and the ``train`` / ``retrain`` jobs call it with a recipe
(:mod:`curation.training.recipes`), which builds the rows (:meth:`~Recipe.build_data`: KB, corpus,
labels) and trains (:meth:`~Recipe.train`: its loss). The rest is shared:

- the run folder that makes an interrupted round resume (:func:`run_folder`);
- dev scoring that picks the epoch (:func:`dev_scorer`, a pool of the dev queries);
- one manifest layout for every version (:func:`register_result`), with the same label
  provenance for every recipe (:func:`with_label_provenance`);
- **test metrics for every version** before the round ends (:func:`gate_candidate`: the whole
  corpus, or a test pool in the simulation), so the Models page and the gate always have them;
  labels of dev and test relations train, so the queries of the groups a compared version
  learned labels of are left out (:mod:`curation.training.round_gate`), and the encoding
  reports its own progress (82-90 %; the index build before a switch 90-99 %);
- **tiny data is named**: fewer than :data:`MIN_EXAMPLES` rows or :data:`MIN_TRAIN_QUERIES` train
  queries, or fewer than :data:`MIN_TEST_QUERIES` test queries, is a warning in the log, the
  result, the version's metrics (``warnings``) and the app; the gate will not promote on fewer
  than :data:`MIN_TEST_QUERIES` test queries without an admin's written reason;
- the gate and the atomic switch (:mod:`curation.training.gate`,
  :mod:`curation.training.activation`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from curation.evaluation.harness import EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.models import Models, ModelVersion, verify_weights
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


def base_path(ws: Workspace, base: str) -> str:
    """The folder of a base model: a registry version (verified weights) or HF name/path."""
    from retrievers.encoder import resolve_model_path

    if Models(ws).is_version(base):
        version = Models(ws).get(base)
        verify_weights(version)
        return str(version.model_dir)
    return resolve_model_path(base)


def run_folder(ws: Workspace, schema: str, recipe: str, data_sha256: str, options: Any) -> Path:
    """Where a run keeps its checkpoints until it is registered: the same data and options give
    the same folder, so an interrupted run resumes where it stopped."""
    key = json.dumps({"examples": data_sha256, "options": asdict(options)}, sort_keys=True,
                     default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return ws.root / "cache" / "training" / f"{schema}-{recipe}-{digest}"


def dev_scorer(ws: Workspace, task: EvalTask, options: Any, document_format: str,
               matcher: EntityMatcher) -> Callable[[Path, int], float] | None:
    """``fn(model_folder, epoch) -> dev NDCG@10`` of a bi-encoder over the dev pool (None:
    ``dev_depth`` 0); ``options`` needs ``dev_depth``, ``dev_random``, ``max_seq_length`` and
    ``seed``. A recipe's own measurement: :func:`curation.training.measures.measure_for`."""
    from curation.training.measures import DenseMeasure

    return DenseMeasure().dev_scorer(ws, task, options, document_format, matcher)


def step_reporter(report: Report | None, progress: bool) -> Any:
    """The engine's ``progress`` argument: a job's ``report`` mapped to 5-95 %, else tqdm."""
    if not report:
        return progress

    def step(done: int, total: int) -> None:
        report(0.05 + 0.9 * done / max(total, 1), f"training step {done:,}/{total:,}")

    return step


def register_result(ws: Workspace, *, schema: str, recipe: str, options: Any, result: Any,
                    train_config: Any, data_manifest: dict[str, Any], document_format: str,
                    resumed: bool, actor: str, run_dir: Path,
                    extra_manifest: dict[str, Any] | None = None,
                    report: Report | None = None) -> ModelVersion:
    """Register a finished run as a candidate version and remove its run folder.

    Args:
        options: The recipe's options dataclass (``base``, ``seed``, ``max_seq_length``...).
        result: The engine's :class:`~retrievers.training.config.TrainResult`.
        data_manifest: The recipe's data manifest (counts per class, coverage, sha256).
        extra_manifest: More fields (retraining: parent version, warm start; imports).
    """
    try:
        if report:
            report(0.97, "registering the model version")
        manifest = {
            "recipe": recipe, "base_model": options.base, **(extra_manifest or {}),
            "options": asdict(options), "train_config": train_config.to_dict(),
            "seed": options.seed, "max_seq_length": options.max_seq_length,
            "document_format": document_format, "examples": data_manifest,
            "curve": [asdict(p) for p in result.curve],
            "dev_scores": list(result.epoch_scores), "best_epoch": result.best_epoch,
            "epochs_run": result.epochs_run, "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "examples_per_second": round(result.examples_per_second, 2),
            "precision": result.precision, "device": result.device,
            "resumed_from_checkpoint": resumed,
        }
        dev = {"dev_ndcg@10": max(result.epoch_scores)} if result.epoch_scores else {}
        version = Models(ws).register(schema=schema, recipe=recipe, base_model=options.base,
                                      model_dir=result.model_dir, manifest=manifest, metrics=dev,
                                      created_by=actor)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    logger.info("registered %s (best epoch %d, %.0f s)", version.id, result.best_epoch,
                result.seconds)
    if report:
        report(1.0, f"registered {version.id}")
    return version


#: Below these a round warns that the data is tiny (module docstring).
MIN_EXAMPLES, MIN_TRAIN_QUERIES = 200, 20


@dataclass(frozen=True)
class GateSettings:
    """How a round's candidate may replace the active version (None in :func:`run_round`: it is
    only registered and scored, as ``kbcurate train`` does).

    Attributes:
        tolerance_pp: The gate's allowed drop per metric (percentage points).
        promote: Switch when the gate passes (False: only report the decision).
        build_index: Build the promoted version's index before the switch.
        small_test_reason: An admin's written reason to promote on fewer than 20 test queries.
        user: Who the switch is audited for (an admin; default: the round's actor as admin).
    """

    tolerance_pp: float = 0.5
    promote: bool = True
    build_index: bool = True
    small_test_reason: str = ""
    user: Any = None


@dataclass(frozen=True)
class RoundResult:
    """What a round produced.

    Attributes:
        version: The new version, with its test metrics (and the gate's decision).
        previous: The active version before the round (None: there was none).
        decision: The gate's decision (None without a gate or without test queries).
        promoted: Whether the new version is now active.
        labels_used: Labels that became training rows.
        warnings: Tiny-data warnings, in words with the numbers.
        test_queries: Test queries the metrics come from.
    """

    version: ModelVersion
    previous: str | None
    decision: Any
    promoted: bool
    labels_used: int
    warnings: tuple[str, ...]
    test_queries: int


def data_warnings(data: Any, uses_queries: bool) -> list[str]:
    """The tiny-training-data warnings of a recipe's rows."""
    out = []
    if data.examples < MIN_EXAMPLES:
        out.append(f"Trained on only {data.examples} examples (< {MIN_EXAMPLES}): the version may "
                   "be no better than its base model; import more KB records or label more")
    if uses_queries and data.train_queries < MIN_TRAIN_QUERIES:
        out.append(f"Trained on only {data.train_queries} train queries (< {MIN_TRAIN_QUERIES}): "
                   "too few to learn the schema's queries")
    return out


def with_label_provenance(data: Any, labels: Any) -> Any:
    """``data`` whose manifest's ``labels`` say, for every recipe alike, which labels became
    rows, per split, the query groups learned, and the labels not used with their reasons
    (:meth:`~curation.training.feedback.LabelExamples.provenance`; the recipe's own keys stay)."""
    if labels is None:
        return data
    own = data.manifest.get("labels")
    merged = {**(own if isinstance(own, dict) else {}),
              **labels.provenance(data.labels_used)}
    return replace(data, manifest={**data.manifest, "labels": merged})


@dataclass(frozen=True)
class RoundContext:
    """What every step of a round shares.

    Attributes:
        ws: The workspace.
        task: The schema's queries and split (all of them).
        matcher: The round's entity matcher.
        actor: Who runs it.
        evaluation: "corpus" or "pool".
        progress: Progress bars (CLI).
        report: A job's ``fn(fraction, message)``.
        measure: How the recipe's versions are measured and switched
            (:func:`curation.training.measures.measure_for`; None: as a bi-encoder).
    """

    ws: Workspace
    task: EvalTask
    matcher: EntityMatcher
    actor: str
    evaluation: str
    progress: bool
    report: Report | None
    measure: Any = None

    @property
    def measured(self) -> Any:
        from curation.training.measures import MEASURES

        return self.measure or MEASURES["dense"]


def run_round(ws: Workspace, schema: str, recipe: str, options: Any = None, *, actor: str,
              labels: Any = None, task: EvalTask | None = None, evaluation: str = "corpus",
              gate: GateSettings | None = None, extra_manifest: dict[str, Any] | None = None,
              progress: bool = True, report: Report | None = None) -> RoundResult:
    """One round of ``recipe`` on ``schema`` (see the module docstring).

    Args:
        options: The recipe's options (its defaults when None).
        actor: Who starts it (``created_by``, the audit).
        labels: :class:`~curation.training.feedback.LabelExamples` to learn from (None: KB only).
        task: The schema's queries and split (built when None).
        evaluation: "corpus" or "pool" (:mod:`curation.training.scoring`).
        gate: Compare with the active version and switch when it passes (None: register and
            score only).
        extra_manifest: More manifest fields (retraining: parent, warm start).

    Raises:
        CurationError: Unknown recipe, bad options, no training data, training failed.
    """
    from curation.evaluation.harness import build_task
    from curation.ranking.learned import learned_groups
    from curation.training.measures import measure_for
    from curation.training.recipes import RoundInput, get_recipe, recipe_options
    from curation.training.scoring import check_evaluation

    check_evaluation(evaluation)
    rec = get_recipe(recipe)
    options = options if options is not None else recipe_options(recipe)
    options.validate()
    task = task or build_task(ws, schema)
    ctx = RoundContext(ws, task, EntityMatcher(), actor, evaluation, progress, report,
                       measure_for(rec))
    _say(report, 0.02, f"building the {recipe} training data")
    data = with_label_provenance(rec.build_data(RoundInput(
        ws, task.schema, task, ctx.matcher, labels, progress and not report), options), labels)
    warnings = data_warnings(data, rec.uses_queries)
    for w in warnings:
        logger.warning("%s %s: %s", task.schema, recipe, w)
    learned = learned_groups({"examples": data.manifest})
    version = train_candidate(ctx, rec, options, data, learned, extra_manifest)
    return gate_candidate(ctx, version, learned, options.seed, gate, warnings,
                          len(data.labels_used))


def train_candidate(ctx: RoundContext, rec: Any, options: Any, data: Any, learned: set[str],
                    extra_manifest: dict[str, Any] | None) -> ModelVersion:
    """Train ``rec`` on ``data`` (resuming an interrupted run) and register the candidate; the
    dev pool that picks the epoch leaves out the dev queries of the ``learned`` groups."""
    from curation.training.round_gate import measured_queries
    from retrievers.errors import RetrieverError

    ws, schema = ctx.ws, ctx.task.schema
    run_dir = run_folder(ws, schema, rec.name, data.manifest["sha256"], options)
    resume = (run_dir / "checkpoints").is_dir()
    if resume:
        logger.warning("resuming the interrupted run in %s", run_dir)
    dev_task = measured_queries(ctx.task, learned).task
    try:
        result = rec.train(base_path(ws, options.base), data, options, run_dir=run_dir,
                           resume=resume,
                           progress=step_reporter(_sub(ctx.report, 0.0, 0.8), ctx.progress),
                           eval_fn=ctx.measured.dev_scorer(ws, dev_task, options,
                                                           data.document_format, ctx.matcher))
    except RetrieverError as exc:
        raise CurationError(f"{rec.name} training of {schema} failed: {exc}") from exc
    return register_result(
        ws, schema=schema, recipe=rec.name, options=options, result=result,
        train_config=options.train_config(), data_manifest=data.manifest,
        document_format=data.document_format, resumed=resume, actor=ctx.actor, run_dir=run_dir,
        extra_manifest={**data.extra_manifest, **(extra_manifest or {})},
        report=_sub(ctx.report, 0.0, 0.8))


def gate_candidate(ctx: RoundContext, version: ModelVersion, learned: set[str], seed: int,
                   gate: GateSettings | None, warnings: list[str], labels_used: int
                   ) -> RoundResult:
    """Score the candidate (and the active version, with a gate) on the test queries of groups
    neither learned labels of (:mod:`curation.training.round_gate`), record the metrics and the
    gate's decision, and switch when it passes."""
    from curation.ranking.learned import learned_groups
    from curation.training.round_gate import gate_decision, measured_queries
    from curation.training.scoring import prefixed, test_warning

    ws, schema, meas = ctx.ws, ctx.task.schema, ctx.measured
    evaluation = meas.evaluation(ctx.evaluation)
    current = meas.active(ws, schema)
    current = current if current is not None and current.id != version.id else None
    active = current if gate is not None else None
    measured = measured_queries(ctx.task, learned | learned_groups(
        active.manifest if active else None))
    left_out = measured.left_out.get("test", ())
    n_test = len(measured.task.split("test"))
    _say(ctx.report, 0.82, f"scoring {version.id} on {n_test} test queries ({evaluation})")
    roles = {"candidate": version, **({"active": active} if active else {})}
    scores = meas.score(ws, measured.task, roles, evaluation=evaluation, seed=seed,
                        matcher=ctx.matcher, progress=ctx.progress and not ctx.report,
                        report=_sub(ctx.report, 0.82, 0.9), left_out=left_out)
    first = (meas.first_reference(ws, measured.task, ctx.matcher, version)
             if gate is not None and active is None and "candidate" in scores else None)
    if first is not None:  # a first version must beat what it would replace (e.g. BM25 alone)
        scores["active"] = first[1]
    for w in (measured.warning(), test_warning(n_test) if n_test or not left_out else None):
        if w is not None:
            warnings.append(w)
            logger.warning("%s: %s", version.id, w)
    metrics: dict[str, Any] = {**prefixed(ws, scores.get("candidate", {}), evaluation, seed,
                                          left_out), "warnings": warnings}
    if left_out:
        metrics["test_left_out"] = measured.to_json()
    decision = gate_decision(schema, scores, gate, n_test, len(left_out))
    if decision is not None:
        metrics["gate"] = {**decision.to_json(),
                           **({"against": first[0]} if first is not None else {})}
    version = Models(ws).update_metrics(version.id, metrics, actor=ctx.actor)
    promoted = False
    if gate is not None and decision is not None and decision.promote and gate.promote:
        version = _switch(ctx, version, gate, decision)
        promoted = True
    _say(ctx.report, 1.0, f"{version.id}: " + (decision.reasons[-1] if decision else
                                                "registered"))
    return RoundResult(version, current.id if current else None, decision, promoted,
                       labels_used, tuple(warnings), n_test)


def _switch(ctx: RoundContext, version: ModelVersion, gate: GateSettings, decision: Any
            ) -> ModelVersion:
    """Build the promoted candidate's index (its own progress, 90-100 %) and activate it."""
    from curation.access.users import Role, User
    from curation.training.round_gate import stage_reporter

    _say(ctx.report, 0.9, f"switching to {version.id} (building its index first, if it has one)")
    return ctx.measured.switch(ctx.ws, version.id, user=gate.user or User(ctx.actor, Role.ADMIN),
                               reason="gate: " + "; ".join(decision.reasons),
                               build_index=gate.build_index,
                               on_progress=stage_reporter(ctx.report, 0.9, 0.99))


def _say(report: Report | None, fraction: float, message: str) -> None:
    logger.info(message)
    if report:
        report(fraction, message)


def _sub(report: Report | None, start: float, end: float) -> Report | None:
    from curation.training.round_gate import scaled

    return scaled(report, start, end)
