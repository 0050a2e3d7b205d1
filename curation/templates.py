"""Query templates: a partial relation (query slots filled, answer hidden) -> query text.

>>> from kb_sources.schema import builtin_schemas
>>> po = builtin_schemas()["PO"]
>>> render_query(po, {"gene": "BRAF", "variant": "V600E"}).text
'Treatment for gene BRAF and variant V600E?'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kb_sources.errors import TemplateError
from kb_sources.schema import Schema, template_parts
from kb_sources.types import Entity

SlotValue = str | Entity | Sequence[Entity]


@dataclass(frozen=True)
class Query:
    """A rendered query.

    Attributes:
        schema: Schema name.
        values: Query slot -> text filled in.
        template: The template used.
        text: The query text (the curator may edit it: see :meth:`edited`).
        edited: True when the curator changed the text by hand.
    """

    schema: str
    values: dict[str, str]
    template: str
    text: str
    edited: bool = False

    def edited_to(self, text: str) -> Query:
        """The same query with curator-edited text (blank text is refused)."""
        if not text.strip():
            raise TemplateError("The query text is empty; type a question or reset the template")
        return replace(self, text=text.strip(), edited=text.strip() != self.text)


def template_fields(template: str) -> set[str]:
    """Slot names a template uses.

    Raises:
        TemplateError: A placeholder is not a plain slot name (see
            :func:`~kb_sources.schema.template_parts`).
    """
    return {name for _, name in template_parts(template) if name is not None}


def fill_template(template: str, filled: Mapping[str, str]) -> str:
    """The template with each ``{slot}`` replaced by its text: names only, never
    ``str.format`` (a format spec in a stored template cannot build a huge string).

    Raises:
        TemplateError: A placeholder is not a plain slot name, or names a slot not in
            ``filled``.
    """
    out = []
    for literal, name in template_parts(template):
        out.append(literal)
        if name is not None:
            if name not in filled:
                raise TemplateError(f"Template {template!r} needs slot {name}, which is empty")
            out.append(filled[name])
    return "".join(out)


def slot_text(value: SlotValue) -> str:
    """Text of a slot value: strings as given, entities by text, several joined with ' and '."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Entity):
        return value.text.strip()
    return " and ".join(e.text.strip() for e in value if e.text.strip())


def render_query(
    schema: Schema,
    values: Mapping[str, SlotValue],
    template: str | int | None = None,
) -> Query:
    """Render a partial relation into query text.

    Args:
        schema: The relation schema.
        values: Query slot -> value (text, Entity or entities). Any subset of the query slots;
            empty values count as missing.
        template: A template string, an index into ``schema.templates``, or None to pick the
            first of the schema's templates whose slots are all given.

    Returns:
        The rendered :class:`Query`.

    Raises:
        TemplateError: The answer slot or an unknown slot was given, a chosen template needs a
            missing slot, or no template fits the given slots.
    """
    filled = {k: slot_text(v) for k, v in values.items()}
    filled = {k: v for k, v in filled.items() if v}
    unknown = sorted(set(filled) - set(schema.slot_names))
    if unknown:
        raise TemplateError(f"Schema {schema.name} has no slot(s) {', '.join(unknown)}; "
                            f"its query slots are {', '.join(schema.query_slots)}")
    if schema.answer in filled:
        raise TemplateError(f"Slot {schema.answer!r} is the answer of schema {schema.name} and "
                            "stays hidden in a query; remove it from the query")
    if not filled:
        raise TemplateError(f"No query slot is filled; give at least one of "
                            f"{', '.join(schema.query_slots)}")
    chosen = _choose_template(schema, filled, template)
    return Query(schema.name, filled, chosen, fill_template(chosen, filled))


def _choose_template(schema: Schema, filled: dict[str, str], template: str | int | None) -> str:
    if isinstance(template, int):
        if not 0 <= template < len(schema.templates):
            raise TemplateError(f"Schema {schema.name} has {len(schema.templates)} template(s); "
                                f"index {template} is out of range")
        template = schema.templates[template]
    if isinstance(template, str):
        missing = sorted(template_fields(template) - set(filled))
        if missing:
            raise TemplateError(
                f"Template {template!r} needs slot(s) {', '.join(missing)}, which are empty. "
                f"Fill {', '.join(missing)} or choose a template that uses only "
                f"{', '.join(sorted(filled))}")
        return template
    for candidate in schema.templates:
        if template_fields(candidate) <= set(filled) and template_fields(candidate):
            return candidate
    needs = "; ".join(f"{t!r} needs {', '.join(sorted(template_fields(t)))}"
                      for t in schema.templates)
    raise TemplateError(f"No template of schema {schema.name} fits the given slot(s) "
                        f"{', '.join(sorted(filled))}: {needs}. Fill the missing slots or add a "
                        "template for this subset to the schema file")
