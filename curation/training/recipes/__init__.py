"""The training recipes by name, built-in and plug-in.

Built in: ``edel`` (:mod:`.edel`), ``bica`` (:mod:`.bica`), ``biohicl`` (:mod:`.biohicl`), ``cross``
(:mod:`.cross`, a cross-encoder measured by re-ranking). A plug-in
is any installed distribution that declares an entry point in the group ``kbcurate.recipes``
whose value is a :class:`~curation.training.recipes.base.Recipe` instance (or class), e.g. in its
``pyproject.toml``::

    [project.entry-points."kbcurate.recipes"]
    toy = "my_package.toy:RECIPE"

Every recipe then works everywhere: ``kbcurate train --recipe toy`` (its flags generated from its
options), ``kbcurate retrain --recipe toy`` (labels become its rows), the app's training form, the
``train`` / ``retrain`` jobs and the simulation; one :func:`curation.training.rounds.run_round`
runs them all.
"""

from __future__ import annotations

import importlib
import logging
from functools import cache
from typing import Any

from curation.training.recipes.base import (
    OptionField,
    Recipe,
    RoundInput,
    TrainingData,
    TrainingOptions,
    option_fields,
)
from kb_sources.errors import CurationError
from kb_sources.plugins import Registry

logger = logging.getLogger(__name__)

#: The entry-point group of plug-in recipes.
ENTRY_POINT_GROUP = "kbcurate.recipes"
#: Built-in recipes: name -> module holding ``RECIPE``.
BUILTIN = {"edel": "curation.training.recipes.edel", "bica": "curation.training.recipes.bica",
           "biohicl": "curation.training.recipes.biohicl",
           "cross": "curation.training.recipes.cross"}
#: The built-in recipes' names, in menu order.
RECIPES = tuple(BUILTIN)

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "RECIPES", "OptionField", "Recipe", "RoundInput",
           "TrainingData", "TrainingOptions", "get_recipe", "option_fields", "option_names",
           "options_class", "recipe_help", "recipe_names", "recipe_options", "refresh"]


def _adopt(loaded: Any, entry_point: str) -> Any:
    recipe = loaded() if isinstance(loaded, type) else loaded
    if isinstance(recipe, Recipe):
        recipe.name = recipe.name or entry_point
    return recipe


def _accept(recipe: Any) -> str | None:
    if not isinstance(recipe, Recipe) or not issubclass(recipe.Options, TrainingOptions):
        return "expected a Recipe whose Options extend TrainingOptions"
    return None


def _unknown(kind: str, name: str, available: list[str]) -> CurationError:
    return CurationError(f"Unknown {kind} {name!r}. Available recipes: {', '.join(available)}")


@cache
def _registry() -> Registry[Recipe]:
    """The recipes (built-ins imported on first use, then the entry-point plug-ins)."""
    return Registry("training recipe",
                    [importlib.import_module(module).RECIPE for module in BUILTIN.values()],
                    group=ENTRY_POINT_GROUP, accept=_accept, adopt=_adopt, error=_unknown)


def refresh() -> None:
    """Forget the registry (after installing a plug-in in a running process)."""
    _registry.cache_clear()


def recipe_names() -> tuple[str, ...]:
    """Every recipe's name: the built-ins first, then plug-ins."""
    return tuple(_registry().names())


def recipe_help() -> dict[str, str]:
    """Name -> one line (menus, ``--help``)."""
    return {recipe.name: recipe.description or recipe.name for recipe in _registry()}


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``.

    Raises:
        CurationError: Unknown name (the message lists the available ones).
    """
    return _registry().get(name)


def options_class(recipe: str) -> type[TrainingOptions]:
    """The options dataclass of a recipe."""
    return get_recipe(recipe).Options


def option_names(recipe: str) -> list[str]:
    return [f.name for f in option_fields(options_class(recipe))]


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
