"""The training recipes by name, built-in and plug-in.

Built in: ``edel`` (:mod:`.edel`), ``bica`` (:mod:`.bica`), ``biohicl`` (:mod:`.biohicl`). A plug-in
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
from importlib.metadata import entry_points
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

logger = logging.getLogger(__name__)

#: The entry-point group of plug-in recipes.
ENTRY_POINT_GROUP = "kbcurate.recipes"
#: Built-in recipes: name -> module holding ``RECIPE``.
BUILTIN = {"edel": "curation.training.recipes.edel", "bica": "curation.training.recipes.bica",
           "biohicl": "curation.training.recipes.biohicl"}
#: The built-in recipes' names, in menu order.
RECIPES = tuple(BUILTIN)

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "RECIPES", "OptionField", "Recipe", "RoundInput",
           "TrainingData", "TrainingOptions", "get_recipe", "option_fields", "option_names",
           "options_class", "recipe_help", "recipe_names", "recipe_options", "refresh"]


@cache
def _registry() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for name, module in BUILTIN.items():
        found[name] = importlib.import_module(module).RECIPE
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found:
            logger.warning("recipe plug-in %s (%s) ignored: the name is taken", ep.name, ep.value)
            continue
        try:
            loaded = ep.load()
        except Exception as exc:  # a broken plug-in must not take the built-ins down
            logger.error("recipe plug-in %s (%s) failed to load: %s", ep.name, ep.value, exc)
            continue
        recipe = loaded() if isinstance(loaded, type) else loaded
        if not isinstance(recipe, Recipe) or not issubclass(recipe.Options, TrainingOptions):
            logger.error("recipe plug-in %s (%s) ignored: expected a Recipe whose Options extend "
                         "TrainingOptions", ep.name, ep.value)
            continue
        recipe.name = recipe.name or ep.name
        found[ep.name] = recipe
    return found


def refresh() -> None:
    """Forget the registry (after installing a plug-in in a running process)."""
    _registry.cache_clear()


def recipe_names() -> tuple[str, ...]:
    """Every recipe's name: the built-ins first, then plug-ins."""
    return tuple(_registry())


def recipe_help() -> dict[str, str]:
    """Name -> one line (menus, ``--help``)."""
    return {name: recipe.description or name for name, recipe in _registry().items()}


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``.

    Raises:
        CurationError: Unknown name (the message lists the available ones).
    """
    registry = _registry()
    if name not in registry:
        raise CurationError(f"Unknown training recipe {name!r}. Available recipes: "
                            f"{', '.join(registry)}")
    return registry[name]


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
