"""Shared checks of values read from files: identifiers, numbers and text fields.

Every reader validates through these functions, so one rule holds for every format:

* A **PMID** is 1-10 ASCII digits (:data:`PMID`). ``str.isdigit`` is not used anywhere: it also
  accepts Arabic-Indic, fullwidth and superscript digits, which PubMed never uses (and ``int()``
  then either converts them silently or crashes).
* Any **other document id** is 1-64 characters from ``A-Z a-z 0-9 . _ : -`` (:data:`DOC_ID`).
  Ids end up in URLs, file names, SQL and Markdown, so nothing else is let through; an id such as
  ``X![px](http://host/p.png)`` is refused. The message names the first bad character and its
  position without echoing the rest of the id.
* **Text fields** are refused, not repaired, when they hold a NUL character or a lone UTF-16
  surrogate (``"\\ud800"``, which only a JSON escape can produce): both are signs of a corrupted
  or mis-encoded file, a NUL is dropped or truncates text in some databases, and a lone surrogate
  cannot be written as UTF-8 at all. Fields over :data:`MAX_FIELD_CHARS` are refused too.
* A **controlled value** (an evidence level, an interaction type) is one of the values its KB
  uses, compared without case; :func:`vocabulary_problem` says why not, and the reader notes the
  row as skipped (:class:`~kb_sources.read_stats.IssueKind` ``UNKNOWN_VALUE``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from os import PathLike

from kb_sources.errors import InputFormatError

#: Longest field (characters) accepted in any record; abstracts are ~1-10k characters.
MAX_FIELD_CHARS = 200_000

#: A PubMed id: ASCII digits only (PMIDs have 8 digits today).
PMID = re.compile(r"[0-9]{1,10}")
#: A document id that is not a PMID (PMC ids, trial ids, "doc_1").
DOC_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
#: Characters allowed in a non-PMID document id, for messages.
DOC_ID_CHARS = "A-Z a-z 0-9 . _ : -"
_ASCII_INT = re.compile(r"[0-9]{1,18}")
_DOC_ID_CHAR = re.compile(r"[A-Za-z0-9._:-]")


def is_pmid(value: str) -> bool:
    """True for a PubMed id: 1-10 ASCII digits (no sign, no blanks, no other scripts)."""
    return PMID.fullmatch(value) is not None


def is_ascii_int(value: str) -> bool:
    """True for a non-negative integer written in ASCII digits (offsets, evidence ids)."""
    return _ASCII_INT.fullmatch(value) is not None


def doc_id_problem(value: str) -> str | None:
    """Why ``value`` is not a valid document id, or None when it is one."""
    if is_pmid(value) or DOC_ID.fullmatch(value):
        return None
    if not value:
        return "document id is empty"
    if len(value) > 64:
        return f"document id is {len(value)} characters long"
    position = next(i for i, c in enumerate(value) if not _DOC_ID_CHAR.fullmatch(c))
    return (f"document id {value[:position]!r}... has {describe_char(value[position])} at "
            f"position {position + 1}")


def check_doc_id(
    path: str | PathLike[str], value: str, *, line: int | None = None, record: str | None = None,
) -> str:
    """Return ``value`` when it is a PMID or a safe document id.

    Raises:
        InputFormatError: Any other id; the message names the first bad character.
    """
    problem = doc_id_problem(value)
    if problem:
        raise InputFormatError(
            path, problem, line=line, record=record,
            expected=f"a PMID (ASCII digits) or an id of 1-64 characters from {DOC_ID_CHARS}",
            fix="replace other characters (spaces, '/', brackets) with '_' or use the PMID",
        )
    return value


def describe_char(char: str) -> str:
    """``"'!' EXCLAMATION MARK (U+0021)"``; invisible characters by name and code point only."""
    code = f"U+{ord(char):04X}"
    if char == "\x00":
        return f"a NUL character ({code})"
    if 0xD800 <= ord(char) <= 0xDFFF:
        return f"a lone surrogate ({code})"
    shown = repr(char) if char.isprintable() and not char.isspace() else ""
    return " ".join(part for part in (shown, unicodedata.name(char, ""), f"({code})") if part)


def check_text(
    path: str | PathLike[str], field_name: str, value: str, *, line: int | None = None,
    record: str | None = None,
) -> str:
    """Return ``value`` when it is storable text: not over-long, no NUL, no lone surrogate.

    Raises:
        InputFormatError: The field is too long or holds a NUL or a lone surrogate (the message
            names the file, line/record, field and position).
    """
    if len(value) > MAX_FIELD_CHARS:
        raise InputFormatError(
            path, f"field {field_name!r} is {len(value):,} characters long", line=line,
            record=record, expected=f"fields under {MAX_FIELD_CHARS:,} characters",
            fix="check the file for a missing record separator or a corrupted record",
        )
    bad = _bad_char_position(value)
    if bad is not None:
        raise InputFormatError(
            path, f"field {field_name!r} holds {describe_char(value[bad])} at character "
            f"{bad + 1}", line=line, record=record,
            expected="text without NUL characters or unpaired UTF-16 surrogates",
            fix="remove the character; a JSON escape such as \\ud800 must be followed by its "
            "low surrogate (\\udc00-\\udfff), or write the character itself in UTF-8",
        )
    return value


def _bad_char_position(value: str) -> int | None:
    """Index of the first NUL or lone surrogate in ``value`` (fast paths: C-level scans only)."""
    positions = [value.find("\x00")]
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # only lone surrogates fail to encode
            positions.append(exc.start)
    found = [p for p in positions if p >= 0]
    return min(found) if found else None


def vocabulary_problem(column: str, value: str, accepted: Sequence[str], what: str) -> str | None:
    """Why ``value`` of ``column`` is not one of ``accepted`` (without case), or None.

    An empty value is accepted (the attribute is left out).

    >>> vocabulary_problem("Level", "99", ("1", "2"), "an OncoKB level")
    "Level '99' is not an OncoKB level (accepted: 1, 2, or empty); the row is skipped"
    """
    if not value or value.casefold() in {a.casefold() for a in accepted}:
        return None
    return (f"{column} {value[:60]!r} is not {what} (accepted: {', '.join(accepted)}, or "
            "empty); the row is skipped")
