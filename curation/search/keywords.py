"""A curator's include and exclude keywords per schema, and their marks in a card's HTML.

Issue 38 item 3: each curator adds words they screen for (include) or against (exclude); the
cards mark them in their own colours beside the entity highlights. They are kept in the
workspace settings (:class:`~curation.store.settings.Settings`, one JSON value per user and
schema), validated on the way in (:func:`set_keywords`; one at a time: :func:`add_keyword`,
:func:`remove_keywords`) and out (:func:`get_keywords`).

:func:`mark_keywords` adds ``<mark class="kb-kw-include">`` / ``kb-kw-exclude`` to HTML that is
already escaped (the output of :func:`curation.matching.highlight.render_highlighted`): only in
text between tags, never inside a tag or an attribute, never inside an entity's tooltip
(``<span class="kb-tip">``: its name, slot and links are not the abstract's words), only whole
words (case-insensitive), and every piece of text it touches is escaped again, so a keyword such
as ``<script>`` or ``"onmouseover=`` can only ever become marked text.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Keywords a curator may keep per schema and kind (include, exclude).
MAX_KEYWORDS = 50
#: Characters per keyword.
MAX_KEYWORD_CHARS = 60
KINDS = ("include", "exclude")
_TAG = re.compile(r"(<[^>]*>)")
_TIP_OPEN = re.compile(r'<span\b[^>]*\bclass="(?:[^"]* )?kb-tip(?: [^"]*)?"', re.IGNORECASE)
_SPAN_OPEN = re.compile(r"<span\b", re.IGNORECASE)
_SPAN_CLOSE = re.compile(r"</span\s*>", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Keywords:
    """One curator's keywords of one schema (plain text; escaped when rendered)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    def to_json(self) -> str:
        return json.dumps({"include": list(self.include), "exclude": list(self.exclude)})


def settings_key(user: str, schema: str) -> str:
    """The ``meta`` key of a user's keywords of a schema (JSON, so no name can collide)."""
    return "keywords:" + json.dumps([user, schema])


def clean_keywords(words: Iterable[object], kind: str) -> tuple[str, ...]:
    """Stripped, de-duplicated (case-insensitively, first spelling kept) keywords.

    Raises:
        CurationError: A keyword is not text, is empty, is longer than
            :data:`MAX_KEYWORD_CHARS`, holds a control character, or there are more than
            :data:`MAX_KEYWORDS`.
    """
    out: dict[str, str] = {}
    for word in words:
        if not isinstance(word, str):
            raise CurationError(f"An {kind} keyword must be text, got {word!r}")
        text = " ".join(word.split())
        if not text:
            raise CurationError(f"An {kind} keyword is empty: type a word or phrase")
        if len(text) > MAX_KEYWORD_CHARS:
            raise CurationError(f"The {kind} keyword {text[:20]!r}... has {len(text)} "
                                f"characters; keep it to {MAX_KEYWORD_CHARS}")
        if _CONTROL.search(text):
            raise CurationError(f"The {kind} keyword {text!r} holds a control character")
        out.setdefault(text.casefold(), text)
    if len(out) > MAX_KEYWORDS:
        raise CurationError(f"{len(out)} {kind} keywords: keep at most {MAX_KEYWORDS} per "
                            "schema (remove some first)")
    return tuple(out.values())


def validated(include: Iterable[object], exclude: Iterable[object]) -> Keywords:
    """Both lists cleaned; a keyword may not be in both.

    Raises:
        CurationError: See :func:`clean_keywords`; or a keyword is both include and exclude.
    """
    inc, exc = clean_keywords(include, "include"), clean_keywords(exclude, "exclude")
    both = {w.casefold() for w in inc} & {w.casefold() for w in exc}
    if both:
        raise CurationError(f"{sorted(both)[0]!r} is both an include and an exclude keyword; "
                            "keep it in one list")
    return Keywords(inc, exc)


def get_keywords(ws: Workspace, user: str, schema: str) -> Keywords:
    """The user's keywords of the schema (empty when none were saved).

    Raises:
        CurationError: The stored value is not the JSON this module writes.
    """
    raw = Settings(ws).value(settings_key(user, schema))
    if raw is None:
        return Keywords()
    try:
        data = json.loads(raw)
        return validated(data["include"], data["exclude"])
    except (ValueError, KeyError, TypeError, CurationError) as exc:
        raise CurationError(f"The saved keywords of {user!r} for schema {schema!r} cannot be "
                            f"read ({exc}); save the keyword lists again to replace them") \
            from exc


def set_keywords(ws: Workspace, user: str, schema: str, include: Iterable[object],
                 exclude: Iterable[object]) -> Keywords:
    """Validate and save the user's keywords of the schema (replacing the lists); returns them.

    Raises:
        CurationError: Bad keywords (nothing is written then).
    """
    if not user or not schema:
        raise CurationError("Keywords need a signed-in user and a schema")
    keywords = validated(include, exclude)
    with ws.transaction():
        Settings(ws).put(settings_key(user, schema), keywords.to_json())
    logger.info("keywords of %s for %s: %d include, %d exclude", user, schema,
                len(keywords.include), len(keywords.exclude))
    return keywords


def check_kind(kind: str) -> str:
    """``kind`` when it is a keyword kind.

    Raises:
        CurationError: Any other value, with the kinds there are.
    """
    if kind not in KINDS:
        raise CurationError(f"Unknown keyword kind {kind!r}. Available options: "
                            f"{', '.join(KINDS)}")
    return kind


def add_keyword(ws: Workspace, user: str, schema: str, kind: str, word: object) -> Keywords:
    """Add one keyword to the user's ``kind`` list of the schema and save; returns the lists.

    A keyword already in that list (in any case) leaves the lists as they are; one in the
    other list is refused (a word is either screened for or against).

    Raises:
        CurationError: An unknown ``kind``, an empty or bad keyword (see
            :func:`clean_keywords`), one in the other list, or unreadable saved keywords.
    """
    check_kind(kind)
    (text,) = clean_keywords([word], kind)
    keywords = get_keywords(ws, user, schema)
    words = getattr(keywords, kind)
    if text.casefold() in {w.casefold() for w in words}:
        return keywords
    lists = {"include": keywords.include, "exclude": keywords.exclude, kind: (*words, text)}
    return set_keywords(ws, user, schema, lists["include"], lists["exclude"])


def remove_keywords(ws: Workspace, user: str, schema: str, kind: str,
                    words: Iterable[str]) -> Keywords:
    """Remove keywords (compared case-insensitively) from the user's ``kind`` list of the schema
    and save; returns the lists. Words not in the list are ignored.

    Raises:
        CurationError: An unknown ``kind``, or unreadable saved keywords.
    """
    check_kind(kind)
    gone = {" ".join(str(w).split()).casefold() for w in words}
    keywords = get_keywords(ws, user, schema)
    kept = tuple(w for w in getattr(keywords, kind) if w.casefold() not in gone)
    lists = {"include": keywords.include, "exclude": keywords.exclude, kind: kept}
    return set_keywords(ws, user, schema, lists["include"], lists["exclude"])


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def keyword_pattern(keywords: Keywords) -> re.Pattern[str] | None:
    """Whole-word, case-insensitive matches of the keywords (groups ``include``, ``exclude``;
    longer keywords first), or None without keywords."""
    parts = [f"(?P<{kind}>{_alternation(words)})"
             for kind, words in (("include", keywords.include), ("exclude", keywords.exclude))
             if words]
    if not parts:
        return None
    return re.compile(rf"(?<!\w)(?:{'|'.join(parts)})(?!\w)", re.IGNORECASE)


def _mark_text(escaped: str, pattern: re.Pattern[str]) -> str:
    """One text node of escaped HTML with its keyword matches marked (untouched when none)."""
    text = html.unescape(escaped)
    pieces, last = [], 0
    for match in pattern.finditer(text):
        kind = "include" if match.group("include") is not None else "exclude"
        pieces += [html.escape(text[last:match.start()]),
                   f'<mark class="kb-kw-{kind}">{html.escape(match.group())}</mark>']
        last = match.end()
    if not pieces:
        return escaped
    return "".join(pieces) + html.escape(text[last:])


def mark_keywords(escaped_html: str, keywords: Keywords) -> str:
    """``escaped_html`` with the keywords marked in its text nodes only.

    Args:
        escaped_html: HTML whose text is already escaped (tags are ours).
        keywords: The curator's keywords.

    Returns:
        The same HTML where every whole-word, case-insensitive match in text between tags
        (outside ``<span class="kb-tip">`` tooltips) is wrapped in
        ``<mark class="kb-kw-include">`` or ``<mark class="kb-kw-exclude">``; tags and
        attributes are left byte for byte.
    """
    pattern = keyword_pattern(keywords)
    if pattern is None or not escaped_html:
        return escaped_html
    out: list[str] = []
    in_tip = 0  # depth of <span> inside a tooltip (0: not in one)
    for i, part in enumerate(_TAG.split(escaped_html)):
        if not i % 2:  # text between tags
            out.append(part if in_tip else _mark_text(part, pattern))
            continue
        if in_tip:
            in_tip += 1 if _SPAN_OPEN.match(part) else -1 if _SPAN_CLOSE.match(part) else 0
        elif _TIP_OPEN.match(part):
            in_tip = 1
        out.append(part)
    return "".join(out)
