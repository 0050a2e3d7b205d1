"""JSON Lines reader: one document per line (plain or gzip).

Each line is a JSON object with:

=================  ==========================================  =========
key                type                                        required
=================  ==========================================  =========
``pmid``           1-10 ASCII digits, as a string or integer   one of
``doc_id``         1-64 of ``A-Z a-z 0-9 . _ : -``             these two
``title``          string (or null)                            title or
``abstract``       string (or null)                            abstract
``journal``        string                                      no
``year``           integer or digit string                     no
``mesh``           list of strings                             no
``references``     list of PMIDs (strings or integers)         no
``source``         string (overrides the reader's default)     no
=================  ==========================================  =========

Other keys (``also_in`` in the abstract pool) are ignored. Text values are checked by
:func:`kb_sources.checks.check_text`: a NUL (``\u0000``) or a lone surrogate escape (``\ud800``)
is refused, not repaired. A document id repeated with identical content is skipped and counted
(:class:`~kb_sources.read_stats.DuplicateCheck`); repeated with different content it is refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from kb_sources.checks import check_doc_id, check_text, is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_lines
from kb_sources.read_stats import DuplicateCheck, ReadStats
from kb_sources.types import Document

logger = logging.getLogger(__name__)

_FIX = ('write one JSON object per line, e.g. {"pmid": "123", "title": "...", '
        '"abstract": "..."}')


def read_jsonl(
    path: str | Path, *, source: str = "jsonl", stats: ReadStats | None = None
) -> Iterator[Document]:
    """Read a JSON Lines file (plain or gzip) as documents. Blank lines are skipped.

    A document id (PMID or ``doc_id``) repeated with identical content is skipped and counted in
    ``stats``; repeated with different content it is refused.

    Args:
        path: The file.
        source: Source label for records without a ``source`` key.
        stats: Collects skipped repeats (see :mod:`kb_sources.read_stats`).

    Returns:
        An iterator of documents in file order.

    Raises:
        InputFormatError: Missing/empty/truncated file, invalid UTF-8, a line that is not a JSON
            object (or nests too deep, or holds a number too long to convert), a missing or
            unsafe id, a value of the wrong type, a record with neither title nor abstract, an
            over-long field, a NUL or lone surrogate in text, or an id repeated with different
            content; the message names the file and line.
    """
    p = Path(path)
    stats = stats if stats is not None else ReadStats(p)
    repeats = DuplicateCheck(p, stats, what="document id",
                             fix="keep one line per document (delete or merge the other)")
    for line_no, line in iter_lines(p):
        if not line.strip():
            continue
        document = _Record(p, line_no, _parse(p, line_no, line)).to_document(source)
        if not repeats.is_repeat(document.doc_id, document, line=line_no):
            yield document
    stats.log_summary()


def _parse(p: Path, line_no: int, line: str) -> dict[str, Any]:
    """The JSON object on one line; every way ``json.loads`` can fail becomes one clear error."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        _fail_line(p, line_no, f"invalid JSON at column {exc.colno}: {exc.msg}",
                   "one complete JSON object per line")
    except RecursionError:
        _fail_line(p, line_no, "JSON arrays/objects are nested too deeply to parse",
                   "a flat JSON object (lists of strings at most)")
    except ValueError as exc:  # an integer of more than 4,300 digits
        _fail_line(p, line_no, f"a JSON number cannot be converted ({str(exc).split(':')[0]})",
                   "numbers of ordinary size (a PMID has at most 10 digits)")
    if not isinstance(data, dict):
        _fail_line(p, line_no, f"line holds a JSON {type(data).__name__}, not an object",
                   "one JSON object per line")
    return data


def _fail_line(p: Path, line_no: int, problem: str, expected: str) -> NoReturn:
    raise InputFormatError(p, problem, line=line_no, expected=expected, fix=_FIX)


class _Record:
    """One parsed line with typed accessors that report the file and line on bad values."""

    def __init__(self, path: Path, line: int, data: dict[str, Any]) -> None:
        self.path = path
        self.line = line
        self.data = data

    def to_document(self, default_source: str) -> Document:
        doc_id = self.doc_id()
        title = self.string("title", doc_id)
        abstract = self.string("abstract", doc_id)
        if not title.strip() and not abstract.strip():
            self.fail(f"record {doc_id} has neither title nor abstract",
                      "a non-empty 'title' or 'abstract'", "drop the line or add the text")
        return Document(
            doc_id=doc_id,
            title=title,
            abstract=abstract,
            source=self.string("source", doc_id) or default_source,
            journal=self.string("journal", doc_id),
            year=self.year(),
            mesh=tuple(dict.fromkeys(self.string_list("mesh", doc_id))),
            references=tuple(dict.fromkeys(self.string_list("references", doc_id, pmids=True))),
        )

    def doc_id(self) -> str:
        if "pmid" in self.data and self.data["pmid"] is not None:
            pmid = self.data["pmid"]
            value = str(pmid).strip() if isinstance(pmid, str | int) and \
                not isinstance(pmid, bool) else ""
            if not is_pmid(value):
                self.fail(f"'pmid' is {_preview(pmid)}", "1-10 ASCII digits (\"12345\" or 12345)",
                          "use 'doc_id' for identifiers that are not PMIDs")
            return value
        doc_id = self.data.get("doc_id")
        if not isinstance(doc_id, str) or not doc_id.strip():
            self.fail(f"no 'pmid' and 'doc_id' is {_preview(doc_id)}",
                      "a 'pmid' (digits) or a non-empty 'doc_id' string", "add an id to the record")
        return check_doc_id(self.path, doc_id.strip(), line=self.line)

    def string(self, key: str, doc_id: str) -> str:
        value = self.data.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.fail(f"{key!r} is a {type(value).__name__}", "a string",
                      f"store {key!r} as a JSON string")
        return check_text(self.path, key, value, line=self.line, record=doc_id)

    def string_list(self, key: str, doc_id: str, *, pmids: bool = False) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        kinds = (str, int) if pmids else (str,)
        if not isinstance(value, list) or not all(
                isinstance(v, kinds) and not isinstance(v, bool) for v in value):
            self.fail(f"{key!r} is {_preview(value, as_json=True)}",
                      f"a list of {'PMIDs' if pmids else 'strings'}",
                      f"store {key!r} as a JSON array, e.g. [\"a\", \"b\"]")
        items = [check_text(self.path, key, str(v), line=self.line, record=doc_id).strip()
                 for v in value]
        bad = [v for v in items if v and pmids and not is_pmid(v)]
        if bad:
            self.fail(f"{key!r} holds {_preview(bad[0])}", "PMIDs (1-10 ASCII digits)",
                      f"remove non-PMIDs from {key!r}")
        return [v for v in items if v]

    def year(self) -> int | None:
        value = self.data.get("year")
        if value is None or value == "":
            return None
        text = str(value).strip() if isinstance(value, str | int) and \
            not isinstance(value, bool) else ""
        if not (text.isascii() and text.isdigit() and len(text) == 4):
            self.fail(f"'year' is {value!r}", "a 4-digit year (2019 or \"2019\")",
                      "store the year only, e.g. 2019")
        return int(text)

    def fail(self, problem: str, expected: str, fix: str) -> NoReturn:
        raise InputFormatError(self.path, problem, line=self.line, expected=expected, fix=fix)


def _preview(value: Any, *, as_json: bool = False) -> str:
    """Short text of a value for messages (repr, or JSON); deep nesting by its type only."""
    try:
        text = json.dumps(value, ensure_ascii=True) if as_json else repr(value)
    except (RecursionError, ValueError):
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."
