"""One registry mechanism for every pluggable part: readers, retrievers, vector stores, job
queues, job kinds, training recipes and rankers.

A :class:`Registry` maps a name to an entry (a frozen dataclass with at least ``name``). Entries
that point at code name it as ``module:attr`` and are imported only when used (:func:`load_target`),
so listing names (``--help``, menus) imports neither torch nor faiss. A registry may also read
entries that installed distributions declare in an entry-point group, e.g. in a plug-in's
``pyproject.toml``::

    [project.entry-points."kbcurate.job_kinds"]
    training = "curation.training.job_kinds:JOB_KINDS"

An entry point resolves to one entry or to an iterable of entries. Names are unique: a built-in
wins over a plug-in of the same name (the plug-in is refused, with an error in the log), and a
plug-in that fails to load is logged and skipped, so a broken plug-in never takes the built-ins
down. A product whose own parts live in modules the registry's package must not import at start
(kbcurate's job kinds: each wing declares its own) names them in ``own_targets``: they are
loaded from the product's own code when the registry is first asked, count as built-ins, and
an entry point that points at them is skipped. Distribution metadata decides nothing about
what is built in: a distribution that calls itself by the product's name and comes first on
``sys.path`` is a plug-in like any other. An unknown name raises the registry's error, whose
message lists the available names.

This module imports only the standard library, so both floor-1 packages (``kb_sources`` and
``retrievers``) and every wing of ``curation`` may use it (tests/test_import_rules.py).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, Protocol, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["Named", "Registry", "RegistryError", "load_target"]


class Named(Protocol):
    """What a registry holds: anything with a ``name``."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


class RegistryError(LookupError):
    """A name is not registered, or an entry cannot be loaded; the message lists the names."""


def load_target(target: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted) and return the attribute.

    Raises:
        RegistryError: ``target`` is not ``module:attr``, or the module or attribute is missing.
    """
    module, sep, attr = str(target).partition(":")
    if not sep or not module or not attr:
        raise RegistryError(f"Expected 'module:attr' (e.g. 'kb_sources.civic:read_civic'), got "
                            f"{target!r}")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise RegistryError(f"Cannot import {module!r} for {target!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistryError(f"{module!r} has no attribute {attr!r} (from {target!r})") from None
    return obj


def _default_error(kind: str, name: str, available: list[str]) -> Exception:
    return RegistryError(f"Unknown {kind} {name!r}. Available options: "
                         f"{', '.join(sorted(available)) or '(none registered)'}")


class Registry(Generic[E]):
    """Name -> entry, built-ins first (in registration order), then entry-point plug-ins.

    Args:
        kind: What the entries are, for messages ("KB reader", "job kind").
        entries: The built-in entries.
        group: Entry-point group of plug-ins (None: built-ins only).
        accept: Checks a plug-in's entry; returns a reason to refuse it, or None to accept.
        error: Builds the error for an unknown name from ``(kind, name, available names)``, so
            each package raises its own error type (default :class:`RegistryError`).
        adopt: Turns what an entry point loaded into the entry to keep, given the entry point's
            name (e.g. instantiate a class, fill in an empty name); default: kept as loaded.
        own_targets: Returns the ``module:attr`` targets of the product's own entries (each an
            entry or an iterable of entries), loaded when the registry is first asked and
            counted as built-ins; entry points with one of these values are skipped.

    Example::

        RETRIEVERS = Registry("retriever", [RetrieverSpec("bm25", "retrievers.bm25:BM25Retriever",
                                                          "BM25 (bm25s)")])
        RETRIEVERS.get("bm25").target      # 'retrievers.bm25:BM25Retriever'
        RETRIEVERS.names()                 # ['bm25']
    """

    def __init__(self, kind: str, entries: Iterable[E] = (), *, group: str | None = None,
                 accept: Callable[[Any], str | None] | None = None,
                 error: Callable[[str, str, list[str]], Exception] = _default_error,
                 adopt: Callable[[Any, str], Any] | None = None,
                 own_targets: Callable[[], Iterable[str]] | None = None) -> None:
        self.kind = kind
        self._own_targets = own_targets
        self._adopt = adopt
        self.group = group
        self._accept = accept
        self._error = error
        self._builtin: dict[str, E] = {}
        for entry in entries:
            self.register(entry)
        self._plugins: dict[str, E] | None = None
        self._own: dict[str, E] = {}

    def register(self, entry: E, *, replace: bool = False) -> E:
        """Add a built-in entry (``replace=True`` to overwrite one of the same name)."""
        if entry.name in self._builtin and not replace:
            raise RegistryError(f"{self.kind} {entry.name!r} is registered twice")
        self._builtin[entry.name] = entry
        return entry

    def _all(self) -> dict[str, E]:
        if self.group is None:
            return self._builtin
        if self._plugins is None:
            self._plugins = self._discover()
        return {**self._builtin, **self._own, **self._plugins}

    def _discover(self) -> dict[str, E]:
        """The product's own entries (:attr:`_own`, from ``own_targets``), then the plug-ins of
        the entry-point group (those pointing at the product's own targets skipped)."""
        targets = list(self._own_targets()) if self._own_targets else []
        self._own = {}
        for target in targets:
            loaded = load_target(target)
            for entry in list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]:
                if entry.name in self._builtin or entry.name in self._own:
                    logger.error("%s %s is declared twice (in %s): the first one is kept",
                                 self.kind, entry.name, ", ".join(targets))
                else:
                    self._own[entry.name] = entry
        points = [ep for ep in entry_points(group=self.group or "") if ep.value not in targets]
        return self._read(points, taken={**self._builtin, **self._own})

    def _read(self, points: list[Any], taken: dict[str, E]) -> dict[str, E]:
        found: dict[str, E] = {}
        for ep in points:
            try:
                loaded = ep.load()
            except Exception as exc:  # a broken plug-in must not take the built-ins down
                logger.error("%s plug-in %s (%s) failed to load: %s", self.kind, ep.name,
                             ep.value, exc)
                continue
            items = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
            for item in items:
                try:
                    item = self._adopt(item, ep.name) if self._adopt else item
                except Exception as exc:
                    logger.error("%s plug-in %s (%s) failed to load: %s", self.kind, ep.name,
                                 ep.value, exc)
                    continue
                name = getattr(item, "name", None) or ep.name
                why = self._accept(item) if self._accept else None
                if why:
                    logger.error("%s plug-in %s (%s) ignored: %s", self.kind, name, ep.value, why)
                elif name in taken or name in self._builtin:
                    logger.error("%s plug-in %s (%s) refused: %r is a built-in %s; give the "
                                 "plug-in's entry another name", self.kind, name, ep.value, name,
                                 self.kind)
                elif name in found:
                    logger.error("%s plug-in %s (%s) refused: another one already registered %r; "
                                 "give one of them another name", self.kind, name, ep.value, name)
                else:
                    found[name] = item
        return found

    def refresh(self) -> None:
        """Read the entry points again (after installing a plug-in in a running process)."""
        self._plugins = None

    def get(self, name: str) -> E:
        """The entry called ``name``.

        Raises:
            Exception: The registry's error (default :class:`RegistryError`), listing the names.
        """
        entries = self._all()
        if name not in entries:
            raise self._error(self.kind, str(name), list(entries))
        return entries[name]

    def names(self) -> list[str]:
        """Every name: built-ins in registration order, then plug-ins."""
        return list(self._all())

    def entries(self) -> list[E]:
        return list(self._all().values())

    def __iter__(self) -> Iterator[E]:
        return iter(self.entries())

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __len__(self) -> int:
        return len(self._all())
