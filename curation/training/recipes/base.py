"""What every training recipe shares: :class:`TrainingOptions`, :class:`RoundInput`,
:class:`TrainingData` and the :class:`Recipe` interface.

A recipe is three things: an ``Options`` dataclass extending :class:`TrainingOptions` (every field
has a default and ``metadata`` with ``help`` and, for a closed set, ``choices``: the CLI flags and
the app's training form are generated from them), :meth:`Recipe.build_data` (the KB, the corpus and
the curators' labels -> training rows) and :meth:`Recipe.train` (rows -> a fine-tuned model with
its loss). :func:`curation.training.rounds.run_round` does the rest for every recipe alike: dev
choice of the epoch, registration, test metrics, the gate.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from curation.evaluation.harness import EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

Report = Callable[[float, str], None]
#: The engine's precisions (:data:`retrievers.training.config.PRECISIONS`).
PRECISIONS = ("auto", "fp32", "bf16")


def option(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:  # noqa: A002
    """A dataclass field of a recipe's options with its help text (and closed set of values)."""
    metadata: dict[str, Any] = {"help": help}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class TrainingOptions:
    """The options every recipe has (a recipe's ``Options`` extends this class).

    The defaults fit a 2-core CPU; a recipe may redeclare a field to change its default.
    """

    base: str = option("all-MiniLM-L6-v2", "base model: HF name, local folder or a registry "
                       "version (default: the packaged MiniLM)")
    epochs: int = option(1, "passes over the training rows")
    batch_size: int = option(16, "rows per optimizer step")
    learning_rate: float = option(2e-5, "peak AdamW learning rate")
    warmup_ratio: float = option(0.1, "share of all steps spent warming up, in [0, 1)")
    max_seq_length: int = option(128, "tokens kept per text")
    seed: int = option(42, "seed of the data and of training")
    precision: str = option("auto", "auto: bf16 on a CUDA GPU, fp32 on CPU; bf16 on CPU uses "
                            "autocast (slow without AVX512-BF16/AMX)", PRECISIONS)
    max_queries: int | None = option(None, "train on at most N train queries (default: all)")
    dev_depth: int = option(20, "BM25 hits per dev query in the dev pool that picks the epoch "
                            "(0: no dev scoring, last epoch)")
    dev_random: int = option(500, "random corpus documents in the dev pool")

    def train_config(self, **extra: Any) -> Any:
        """The engine's :class:`~retrievers.training.config.TrainConfig` (bad values:
        :class:`CurationError`)."""
        from retrievers.errors import RetrieverError
        from retrievers.training.config import TrainConfig

        shared = ("epochs", "batch_size", "learning_rate", "warmup_ratio", "max_seq_length",
                  "seed", "precision")
        try:
            return TrainConfig(**{k: getattr(self, k) for k in shared}, **extra)
        except RetrieverError as exc:
            raise CurationError(str(exc)) from exc

    def validate(self) -> None:
        """Raise :class:`CurationError` on any invalid value (a recipe adds its own checks)."""
        self.train_config()
        problems = []
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                problems.append(f"{f.name} must be one of {', '.join(map(str, choices))}, got "
                                f"{getattr(self, f.name)!r}")
        mq = self.max_queries
        if mq is not None and (isinstance(mq, bool) or not isinstance(mq, int) or mq < 1):
            problems.append(f"max_queries must be an integer >= 1 or empty (all), got {mq!r}")
        for name in ("dev_depth", "dev_random"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(f"{name} must be an integer >= 0, got {value!r}")
        if problems:
            raise CurationError("Invalid training options: " + "; ".join(problems))


@dataclass(frozen=True)
class OptionField:
    """One option as the CLI and the app's form see it.

    Attributes:
        name: The field name (``batch_size``; the flag is ``--batch-size``).
        kind: ``int``, ``float``, ``str`` or ``bool``.
        default: The recipe's default (None: unset, e.g. ``max_queries``).
        optional: The value may be None.
        help: One line.
        choices: The allowed values, or None.
        shared: A :class:`TrainingOptions` field (every recipe has it).
    """

    name: str
    kind: type
    default: Any
    optional: bool
    help: str
    choices: tuple[Any, ...] | None
    shared: bool


def option_fields(cls: type) -> list[OptionField]:
    """The fields of an options class, typed for flags and widgets.

    Raises:
        CurationError: A field without a default or of a type a flag cannot carry.
    """
    hints = typing.get_type_hints(cls)
    shared = {f.name for f in fields(TrainingOptions)}
    out = []
    for f in fields(cls):
        kind, optional = _kind(hints[f.name])
        if kind is None:
            raise CurationError(f"{cls.__name__}.{f.name}: options must be int, float, str or "
                                f"bool (or one of them | None), not {hints[f.name]!r}")
        out.append(OptionField(f.name, kind, _default(f), optional,
                               str(f.metadata.get("help", "")), f.metadata.get("choices"),
                               f.name in shared))
    return out


def _kind(hint: Any) -> tuple[type | None, bool]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = len(args) < len(typing.get_args(hint))
    if optional and len(args) == 1:
        hint = args[0]
    return (hint if hint in (int, float, str, bool) else None), optional


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    raise CurationError(f"training option {f.name} needs a default")


@dataclass(frozen=True)
class RoundInput:
    """What a recipe's :meth:`~Recipe.build_data` gets.

    Attributes:
        ws: The workspace.
        schema: The schema's name.
        task: The schema's queries and their split.
        matcher: The entity matcher of the round.
        labels: The curators' labels made examples
            (:class:`~curation.training.feedback.LabelExamples`: current labels, conflicts
            resolved, final grades applied, dev/test queries held out), or None (KB only).
        progress: Progress bars (CLI).
    """

    ws: Workspace
    schema: str
    task: EvalTask
    matcher: EntityMatcher
    labels: Any = None
    progress: bool = False


@dataclass(frozen=True)
class TrainingData:
    """A recipe's training rows.

    Attributes:
        rows: The recipe's own rows (pairs, triplets, a dataset...), handed to its ``train``.
        manifest: Counts per class, coverage, ``sha256`` of the rows, ``examples`` (row count):
            recorded in the version's manifest (``examples``).
        document_format: How a document became text (``"{title} {abstract}"``).
        train_queries: Train-split queries the rows come from (0: the recipe uses no query).
        labels_used: Ids of the labels that became rows.
        extra_manifest: More manifest fields (e.g. BioHiCL's LoRA facts, set during training).
    """

    rows: Any
    manifest: dict[str, Any]
    document_format: str
    train_queries: int
    labels_used: tuple[int, ...] = ()
    extra_manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def examples(self) -> int:
        return int(self.manifest.get("examples", 0))


class Recipe:
    """A training recipe (subclass it; register it in :mod:`curation.training.recipes` or
    through the ``kbcurate.recipes`` entry-point group).

    Attributes:
        name: Registry name (``edel``); versions are ``<schema>-<name>@n``.
        description: One line for menus and ``--help``.
        labels: How curators' labels become this recipe's rows (one line, shown to admins).
        Options: The options dataclass (extends :class:`TrainingOptions`).
        uses_queries: False when the recipe learns from the corpus alone (BioHiCL): the
            tiny-data warning then counts rows only.
        measured_by: How its versions are measured, gated and switched
            (:data:`curation.training.measures.MEASURES`): ``"dense"`` (a bi-encoder: encoded,
            ranked by cosine, activated with its index) or ``"rerank"`` (a cross-encoder:
            re-ranks the first stage's top K, its own active slot).
    """

    name: str = ""
    description: str = ""
    labels: str = ""
    Options: type[TrainingOptions] = TrainingOptions
    uses_queries: bool = True
    measured_by: str = "dense"

    def build_data(self, data_in: RoundInput, options: Any) -> TrainingData:
        """Training rows from the KB (train split), the corpus and the labels."""
        raise NotImplementedError

    def train(self, base: str, data: TrainingData, options: Any, *, run_dir: Path,
              resume: bool, progress: Any, eval_fn: Any) -> Any:
        """Fine-tune ``base`` (a model folder) on ``data`` with checkpoints in ``run_dir``;
        return the engine's :class:`~retrievers.training.config.TrainResult`. ``eval_fn``
        (``fn(folder, epoch) -> dev NDCG@10`` or None) picks the epoch."""
        raise NotImplementedError
