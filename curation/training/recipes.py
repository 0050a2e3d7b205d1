"""The training recipes by name: ``edel``, ``bica``, ``biohicl``.

One entry point for the CLI (``kbcurate train --recipe``), the app's training form, the ``train``
job kind and the benchmark: :func:`recipe_options` turns plain values into the recipe's options
(unknown names and bad values are clear errors before anything runs) and :func:`train_recipe`
runs one round and registers a candidate version ``<schema>-<recipe>@n``.

- ``edel`` (:mod:`curation.training.edel`): KB-graded margins, pointwise multi-margin loss.
- ``bica`` (:mod:`curation.training.bica_train`): hard negatives from walks over the citation
  graph or a kNN graph of the corpus, multiple-negatives ranking.
- ``biohicl`` (:mod:`curation.training.hicl_train`): the MeSH hierarchy of the corpus's
  headings, MSE + hierarchical contrastive loss, LoRA merged before registration.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from curation.store.models import ModelVersion
from curation.store.workspace import Workspace
from curation.training.rounds import Report
from kb_sources.errors import CurationError

RECIPES = ("edel", "bica", "biohicl")
#: What each recipe learns from, for menus and help texts.
RECIPE_HELP = {
    "edel": "EDEL: KB records graded by how much of the relation an abstract mentions",
    "bica": "BiCA: hard negatives from walks over citation / kNN graphs",
    "biohicl": "BioHiCL: the MeSH hierarchy of the corpus's headings (LoRA)",
}


def options_class(recipe: str) -> type:
    """The options dataclass of a recipe."""
    if recipe == "edel":
        from curation.training.edel import EdelOptions
        return EdelOptions
    if recipe == "bica":
        from curation.training.bica_train import BicaOptions
        return BicaOptions
    if recipe == "biohicl":
        from curation.training.hicl_train import HiclOptions
        return HiclOptions
    raise CurationError(f"Unknown training recipe {recipe!r}. Available recipes: "
                        f"{', '.join(RECIPES)}")


def option_names(recipe: str) -> list[str]:
    return [f.name for f in fields(options_class(recipe))]


def recipe_options(recipe: str, values: dict[str, Any] | None = None) -> Any:
    """Validated options of ``recipe`` from plain values (missing ones take the defaults).

    Raises:
        CurationError: Unknown recipe, unknown option names, or invalid values.
    """
    cls = options_class(recipe)
    values = dict(values or {})
    names = option_names(recipe)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise CurationError(f"Unknown {recipe} training option(s) {', '.join(unknown)}. "
                            f"Available options: {', '.join(names)}")
    try:
        options = cls(**values)
    except TypeError as exc:
        raise CurationError(f"Invalid {recipe} training options: {exc}") from exc
    options.validate()
    return options


def train_recipe(ws: Workspace, schema: str, recipe: str, options: Any = None, *, actor: str,
                 progress: bool = True, report: Report | None = None) -> ModelVersion:
    """Run one round of ``recipe`` on ``schema`` and register a candidate version."""
    options = options if options is not None else recipe_options(recipe)
    if recipe == "edel":
        from curation.training.edel import train_edel
        return train_edel(ws, schema, options, actor=actor, progress=progress, report=report)
    if recipe == "bica":
        from curation.training.bica_train import train_bica
        return train_bica(ws, schema, options, actor=actor, progress=progress, report=report)
    if recipe == "biohicl":
        from curation.training.hicl_train import train_biohicl
        return train_biohicl(ws, schema, options, actor=actor, progress=progress, report=report)
    raise CurationError(f"Unknown training recipe {recipe!r}. Available recipes: "
                        f"{', '.join(RECIPES)}")
