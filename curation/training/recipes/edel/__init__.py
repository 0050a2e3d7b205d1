"""EDEL (Wang & Leser; TRAINING.md 1): KB records graded by how much of the relation an abstract
mentions -> pointwise multi-margin loss.

Rows: :func:`curation.training.recipes.edel.examples.build_examples` over the train split, plus the
curators' labels (:mod:`curation.training.feedback`): *complete* -> a positive with mu 0, *partial*
-> a noisy positive with the margin of its g pattern, *irrelevant* -> a hard negative (mu 0.8); a
label replaces the KB example of the same (query, document). Loss: MultiMargin
(:func:`retrievers.training.trainer.train_pairs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.training.recipes.base import (
    Recipe,
    RoundInput,
    TrainingData,
    TrainingOptions,
    option,
)
from curation.training.recipes.edel.examples import (
    Ablation,
    ExampleConfig,
    ExampleSet,
    build_examples,
    to_pairs,
)


@dataclass(frozen=True)
class EdelOptions(TrainingOptions):
    """Options of one EDEL round (see :class:`TrainingOptions` for the shared ones)."""

    margin_function: str = option("angle", "how mu becomes a margin (EDEL code: angle)",
                                  ("angle", "distance"))
    negatives_per_class: int = option(2, "cap per negative class per query, times its "
                                         "positives (EDEL code: 20)")
    bm25_depth: int = option(50, "BM25 hits looked at per query for BM25 negatives")
    ablation: str = option("none", "EDEL's ablations (Table 3), cumulative",
                           tuple(a.value for a in Ablation))
    group_by_length: bool = option(False, "batches of similar-length pairs; saves padding (6% "
                                          "of token slots at 128-256 tokens, 31% at 512)")

    def train_config(self, **extra: Any) -> Any:
        return super().train_config(margin_function=self.margin_function,
                                    group_by_length=self.group_by_length, **extra)

    def validate(self) -> None:
        super().validate()
        self.example_config()

    def example_config(self) -> ExampleConfig:
        return ExampleConfig(negatives_per_class=self.negatives_per_class,
                             bm25_depth=self.bm25_depth, ablation=self.ablation, seed=self.seed,
                             max_queries=self.max_queries)


class EdelRecipe(Recipe):
    """EDEL: margins graded by the KB, labels as graded pairs."""

    name = "edel"
    description = "EDEL: KB records graded by how much of the relation an abstract mentions"
    labels = ("complete -> positive (mu 0); partial -> noisy positive (its g pattern's margin); "
              "irrelevant -> hard negative (mu 0.8); a label replaces the KB's pair")
    Options = EdelOptions

    def build_data(self, data_in: RoundInput, options: Any) -> TrainingData:
        from curation.training.feedback import merge_examples

        examples = kb_examples(data_in, options)
        used: tuple[int, ...] = ()
        if data_in.labels is not None:
            examples = merge_examples(examples, data_in.labels,
                                      {"last_label_id": data_in.labels.last_label_id})
            used = tuple(data_in.labels.used)
        return TrainingData(examples, examples.manifest,
                            examples.manifest["config"]["document_format"],
                            len({e.qid for e in examples.examples}), used)

    def train(self, base: str, data: TrainingData, options: Any, *, run_dir: Path,
              resume: bool, progress: Any, eval_fn: Any) -> Any:
        from retrievers.training.trainer import train_pairs

        return train_pairs(base, to_pairs(data.rows), run_dir, options.train_config(),
                           resume=resume, progress=progress, eval_fn=eval_fn)


def kb_examples(data_in: RoundInput, options: EdelOptions) -> ExampleSet:
    """The KB's EDEL examples of the train split."""
    return build_examples(data_in.ws, data_in.schema, options.example_config(),
                          matcher=data_in.matcher, task=data_in.task,
                          progress=data_in.progress)


RECIPE = EdelRecipe()
