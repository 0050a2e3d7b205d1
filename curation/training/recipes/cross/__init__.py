"""A cross-encoder recipe (issue 45): (query text, title + abstract) -> one relevance logit,
trained on the schema's KB the EDEL way and on the curators' labels.

Rows: EDEL's examples of the train split (:func:`curation.training.recipes.edel.kb_examples`):
every KB-cited abstract of a train relation is a positive, graded by which of the relation's
entities it mentions (the schema's margin table: complete mu 0, partial matches higher);
negatives are other relations' abstracts classed by what they share with the query, the first
stage's (BM25's) top ``bm25_depth`` hits that the KB does not cite for the query entity and that
mention no known answer, and seeded random documents; and, for a re-ranker, the first stage's
own top hits in rank order that the KB does not cite for the query and that name no known answer
(``first_stage_negatives`` per query): the candidates it meets when it re-ranks. Labels are
merged as for EDEL
(:func:`curation.training.feedback.merge_examples`): *complete* -> a positive (mu 0), *partial*
-> a noisy positive with its g pattern's margin, *irrelevant* -> a hard negative (mu 0.8).

Loss (:mod:`retrievers.training.cross`): EDEL's pointwise multi-margin loss with
``tanh(logit / 2)`` in the cosine's place, so noisy positives are pulled only as far as their
margin, as EDEL does (``loss="bce"``: graded binary cross-entropy instead).

Base: the packaged all-MiniLM-L6-v2 with a new one-logit head (seeded), or any cross-encoder
folder or name with safetensors weights (``ncbi/MedCPT-Cross-Encoder``,
``cross-encoder/ms-marco-MiniLM-L6-v2``), or a registry version (warm start).

A version ``<schema>-cross@n`` is measured by re-ranking (``measured_by = "rerank"``,
:class:`curation.training.measures.RerankMeasure`): its dev score (which epoch) re-ranks BM25's
top ``dev_depth`` of the dev queries; its test metrics and the gate re-rank BM25's top
``rerank_depth``. The first cross version must beat BM25 alone; later ones the active cross
version. Activating it sets the schema's active cross-encoder
(:mod:`curation.training.cross_versions`), never the dense version search encodes with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.training.recipes.base import Recipe, RoundInput, TrainingData, TrainingOptions, option
from curation.training.recipes.edel import EdelOptions
from curation.training.recipes.edel.examples import build_examples, to_pairs
from kb_sources.errors import CurationError

#: The losses (:data:`retrievers.training.cross.CROSS_LOSSES`).
LOSSES = ("margin", "bce")


@dataclass(frozen=True)
class CrossOptions(TrainingOptions):
    """Options of one cross-encoder round (see :class:`TrainingOptions` for the shared ones).

    Defaults fit the 30-minute budget of a disease_gene round on 2 CPU cores and are the
    measured ones (issue 45: 6,449 rows, 21.5 min; docs/training.md).
    """

    max_seq_length: int = option(256, "tokens kept per (query, title + abstract) pair")
    precision: str = option("auto", "auto: bf16 on a CUDA GPU with bf16 and on a CPU with "
                            "AVX512-BF16/AMX, else fp32", ("auto", "fp32", "bf16"))
    learning_rate: float = option(1e-4, "peak AdamW learning rate (a new head on 400 steps; "
                                  "2e-5 barely moved its logits)")
    loss: str = option("bce", "bce: graded binary cross-entropy (measured, issue 45); margin: "
                       "EDEL's multi-margin loss on tanh(logit/2)", LOSSES)
    margin_function: str = option("angle", "how mu becomes a margin (EDEL code: angle)",
                                  ("angle", "distance"))
    negatives_per_class: int = option(1, "cap per negative class per query, times its "
                                         "positives (EDEL code: 20)")
    bm25_depth: int = option(50, "BM25 hits looked at per query for hard negatives")
    first_stage_negatives: int = option(15, "BM25's best-ranked hits per query the KB does "
                                        "not cite (naming no known answer), as negatives")
    rerank_depth: int = option(100, "first-stage (BM25) hits re-ranked per test query when the "
                               "version is measured and gated")

    def train_config(self, **extra: Any) -> Any:
        return super().train_config(margin_function=self.margin_function, **extra)

    def validate(self) -> None:
        super().validate()
        depth = self.rerank_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
            raise CurationError(f"Invalid training options: rerank_depth must be an integer in "
                                f"1..1000, got {depth!r}")
        self.edel_options().validate()
        self.example_config()

    def edel_options(self) -> EdelOptions:
        """The EDEL options that draw the same rows (examples, margins, negatives)."""
        return EdelOptions(seed=self.seed, max_queries=self.max_queries,
                           margin_function=self.margin_function,
                           negatives_per_class=self.negatives_per_class,
                           bm25_depth=self.bm25_depth)

    def example_config(self) -> Any:
        """EDEL's example configuration plus the first-stage negatives."""
        from dataclasses import replace

        return replace(self.edel_options().example_config(),
                       first_stage_negatives=self.first_stage_negatives)


class CrossRecipe(Recipe):
    """A cross-encoder on EDEL's graded pairs, measured by re-ranking BM25's top K."""

    name = "cross"
    description = ("Cross-encoder: reads query and abstract together, re-ranks the first "
                   "stage's top K; trained on EDEL's graded KB pairs")
    labels = ("complete -> positive (mu 0); partial -> noisy positive (its g pattern's margin); "
              "irrelevant -> hard negative (mu 0.8); a label replaces the KB's pair")
    Options = CrossOptions
    measured_by = "rerank"

    def build_data(self, data_in: RoundInput, options: Any) -> TrainingData:
        from curation.training.feedback import merge_examples

        examples = build_examples(data_in.ws, data_in.schema, options.example_config(),
                                  matcher=data_in.matcher, task=data_in.task,
                                  progress=data_in.progress)
        used: tuple[int, ...] = ()
        if data_in.labels is not None:
            examples = merge_examples(examples, data_in.labels,
                                      {"last_label_id": data_in.labels.last_label_id})
            used = tuple(data_in.labels.used)
        manifest = {**examples.manifest, "recipe": "cross"}
        return TrainingData(examples, manifest, manifest["config"]["document_format"],
                            len({e.qid for e in examples.examples}), used,
                            {"kind": "cross", "rerank_depth": options.rerank_depth,
                             "loss": options.loss})

    def train(self, base: str, data: TrainingData, options: Any, *, run_dir: Path,
              resume: bool, progress: Any, eval_fn: Any) -> Any:
        from retrievers.training.cross import train_cross

        return train_cross(base, to_pairs(data.rows), run_dir, options.train_config(),
                           loss=options.loss, resume=resume, progress=progress, eval_fn=eval_fn)


RECIPE = CrossRecipe()
