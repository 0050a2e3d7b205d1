"""Graded relevance for the learned ranker: from the KB (EDEL's g classes) and from every label.

The grade table is data (``assets/grades/default.toml``, overridden per schema by
``WS/grades/<schema>.toml``): a document the KB cites for the partial relation gets ``complete``
when it mentions every query entity and a known answer, ``query_only`` when it mentions every
query entity but no answer, ``some`` otherwise; every other candidate gets ``negative``. A
curator's label replaces the KB grade of the same (query, document); when several users labelled
it, the caller has already resolved the conflict (the most senior role wins, then the latest, as
the feedback loop does), so this module takes one grade per pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from curation.matching.matcher import EntityMatcher
from curation.store.label_types import Grade
from kb_sources.errors import CurationError
from kb_sources.schema import SchemaError, read_toml
from kb_sources.types import Entity

_KB_KEYS = ("complete", "query_only", "some", "negative")
_LABEL_KEYS = ("complete", "partial", "irrelevant")


@dataclass(frozen=True)
class GradeTable:
    """Grades (non-negative integers) of KB classes and label grades; ``origin``: the file."""

    kb: Mapping[str, int]
    labels: Mapping[str, int]
    origin: str = ""

    def label(self, grade: Grade | str) -> int | None:
        """The grade of a label (None for ``skip``: not judged, never trained on)."""
        value = Grade.parse(grade)
        return None if value is Grade.SKIP else self.labels[value.value]

    def to_json(self) -> dict[str, Any]:
        return {"kb": dict(self.kb), "labels": dict(self.labels), "origin": self.origin}


def _default() -> dict[str, Any]:
    path = resources.files("assets") / "grades" / "default.toml"
    return read_toml(Path(str(path)), "grade table")


def grade_table(schema: str, workspace_root: Path | None = None) -> GradeTable:
    """The schema's grade table: the packaged default, with ``WS/grades/<schema>.toml`` on top.

    Raises:
        CurationError: The override is not TOML or holds a grade that is not an integer 0-30.
    """
    data = _default()
    kb, labels = dict(data["kb"]), dict(data["labels"])
    origin = "assets/grades/default.toml"
    override = workspace_root / "grades" / f"{schema}.toml" if workspace_root else None
    if override is not None and override.is_file():
        try:
            extra = read_toml(override, "grade table")
        except SchemaError as exc:
            raise CurationError(str(exc)) from exc
        for section, keys, target in (("kb", _KB_KEYS, kb), ("labels", _LABEL_KEYS, labels)):
            values = extra.get(section, {})
            if not isinstance(values, dict):
                raise CurationError(f"{override}: [{section}] must be a table of grades")
            for key, value in values.items():
                if key not in keys:
                    raise CurationError(f"{override}: unknown key {section}.{key}; expected "
                                        f"one of {', '.join(keys)}")
                target[key] = value
        origin = str(override)
    for where, values in (("kb", kb), ("labels", labels)):
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 30:
                raise CurationError(f"{origin}: grade {where}.{key} = {value!r}; expected an "
                                    "integer from 0 to 30 (lambdarank's label range)")
    return GradeTable(kb, labels, origin)


def kb_grade(table: GradeTable, text: str, query: Mapping[str, Sequence[Entity]],
             answers: Sequence[Entity], matcher: EntityMatcher) -> int:
    """The KB grade of a document cited for the partial relation (its g class)."""
    every_query = all(any(matcher.mentions(e, text) for e in ents)
                      for ents in query.values() if ents)
    answer = any(matcher.mentions(a, text) for a in answers)
    if every_query and answer:
        return table.kb["complete"]
    if every_query:
        return table.kb["query_only"]
    return table.kb["some"]


def graded(candidates: Sequence[str], cited: Mapping[str, int],
           labels: Mapping[str, int], negative: int) -> list[int]:
    """Grades of ``candidates`` in order: a label, else the KB grade of a cited document, else
    ``negative``."""
    return [labels[d] if d in labels else cited.get(d, negative) for d in candidates]
