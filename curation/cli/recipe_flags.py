"""Command-line flags of the training recipes, generated from their options dataclasses.

Each field of a recipe's ``Options`` (:mod:`curation.training.recipes`) becomes a flag: its name
with dashes, its type, its closed set of values (``choices``), its help text, ``--x/--no-x`` for a
bool. Options every recipe has are grouped under "all recipes", the others under their recipe. By
default no flag has a default value, so only the flags given are passed on and each recipe keeps
its own defaults; an option the chosen recipe lacks is then a clear error from
:func:`~curation.training.recipes.recipe_options`.
"""

from __future__ import annotations

import argparse
from typing import Any

from curation.training.recipes import (
    OptionField,
    option_fields,
    options_class,
    recipe_help,
    recipe_names,
)


def add_recipe_argument(p: argparse.ArgumentParser, default: str = "edel") -> None:
    """``--recipe NAME`` with every registered recipe (plug-ins too) in its choices."""
    p.add_argument("--recipe", default=default, choices=recipe_names(),
                   help="; ".join(f"{k}: {v}" for k, v in recipe_help().items()))


def add_recipe_flags(p: argparse.ArgumentParser, *, only: str | None = None,
                     with_defaults: bool = False) -> None:
    """One flag per option of every recipe (or of recipe ``only``).

    Args:
        only: Just this recipe's options, in one group.
        with_defaults: The flags default to that recipe's defaults (needs ``only``); else
            a flag not given is absent from the namespace.
    """
    names = [only] if only else list(recipe_names())
    defaults: dict[str, dict[str, Any]] = {}
    for name in names:
        for f in option_fields(options_class(name)):
            defaults.setdefault(f.name, {})[name] = f.default
    seen: set[str] = set()
    shared = p.add_argument_group("all recipes") if not only else None
    for name in names:
        group = p.add_argument_group(name) if not only else p
        for f in option_fields(options_class(name)):
            if f.name in seen:
                continue
            seen.add(f.name)
            target = shared if (f.shared and shared is not None) else group
            _add_flag(target, f, with_defaults and only is not None, defaults[f.name])


def _add_flag(group: Any, f: OptionField, with_default: bool, defaults: dict[str, Any]) -> None:
    flag = "--" + f.name.replace("_", "-")
    default = f.default if with_default else argparse.SUPPRESS
    if len(set(map(repr, defaults.values()))) > 1:  # recipes differ: name each one's
        shown = " (default " + ", ".join(f"{k} {v}" for k, v in defaults.items()) + ")"
    else:
        shown = "" if f.default in (None, "") else f" (default {f.default})"
    helptext = (f.help + shown).replace("%", "%%")
    if f.kind is bool:
        group.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                           help=helptext)
        return
    kwargs: dict[str, Any] = {"type": f.kind, "default": default, "help": helptext}
    if f.choices:
        kwargs["choices"] = list(f.choices)
    group.add_argument(flag, **kwargs)


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe options given on the command line (by field name)."""
    names = {f.name for r in recipe_names() for f in option_fields(options_class(r))}
    return {k: v for k, v in vars(args).items() if k in names}
