"""JSON Lines reader: one document per line (plain or gzip).

Each line is a JSON object with:

=================  ==========================================  =========
key                type                                        required
=================  ==========================================  =========
``pmid``           digits, as a string or an integer           one of
``doc_id``         non-empty string (for non-PubMed texts)     these two
``title``          string (or null)                            title or
``abstract``       string (or null)                            abstract
``journal``        string                                      no
``year``           integer or digit string                     no
``mesh``           list of strings                             no
``references``     list of PMIDs (strings or integers)         no
``source``         string (overrides the reader's default)     no
=================  ==========================================  =========

Other keys (``also_in`` in the abstract pool) are ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from kb_sources.errors import InputFormatError
from kb_sources.io import check_field_length, is_pmid, iter_lines
from kb_sources.types import Document

logger = logging.getLogger(__name__)

_FIX = ('write one JSON object per line, e.g. {"pmid": "123", "title": "...", '
        '"abstract": "..."}')


def read_jsonl(path: str | Path, *, source: str = "jsonl") -> Iterator[Document]:
    """Read a JSON Lines file (plain or gzip) as documents. Blank lines are skipped.

    Args:
        path: The file.
        source: Source label for records without a ``source`` key.

    Returns:
        An iterator of documents in file order.

    Raises:
        InputFormatError: Missing/empty/truncated file, invalid UTF-8, a line that is not a JSON
            object, a missing id, a value of the wrong type, a record with neither title nor
            abstract, or an over-long field; the message names the file and line.
    """
    p = Path(path)
    for line_no, line in iter_lines(p):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFormatError(
                p, f"invalid JSON at column {exc.colno}: {exc.msg}", line=line_no,
                expected="one complete JSON object per line", fix=_FIX,
            ) from exc
        if not isinstance(data, dict):
            raise InputFormatError(
                p, f"line holds a JSON {type(data).__name__}, not an object", line=line_no,
                expected="one JSON object per line", fix=_FIX,
            )
        yield _Record(p, line_no, data).to_document(source)


class _Record:
    """One parsed line with typed accessors that report the file and line on bad values."""

    def __init__(self, path: Path, line: int, data: dict[str, Any]) -> None:
        self.path = path
        self.line = line
        self.data = data

    def to_document(self, default_source: str) -> Document:
        doc_id = self.doc_id()
        title = self.string("title")
        abstract = self.string("abstract")
        if not title.strip() and not abstract.strip():
            self.fail(f"record {doc_id} has neither title nor abstract",
                      "a non-empty 'title' or 'abstract'", "drop the line or add the text")
        for key, value in (("title", title), ("abstract", abstract)):
            check_field_length(self.path, key, value, line=self.line, record=doc_id)
        return Document(
            doc_id=doc_id,
            title=title,
            abstract=abstract,
            source=self.string("source") or default_source,
            journal=self.string("journal"),
            year=self.year(),
            mesh=tuple(dict.fromkeys(self.string_list("mesh"))),
            references=tuple(dict.fromkeys(self.string_list("references", pmids=True))),
        )

    def doc_id(self) -> str:
        if "pmid" in self.data and self.data["pmid"] is not None:
            pmid = self.data["pmid"]
            value = str(pmid).strip() if isinstance(pmid, str | int) and \
                not isinstance(pmid, bool) else ""
            if not is_pmid(value):
                self.fail(f"'pmid' is {pmid!r}", "digits (\"12345\" or 12345)",
                          "use 'doc_id' for identifiers that are not PMIDs")
            return value
        doc_id = self.data.get("doc_id")
        if not isinstance(doc_id, str) or not doc_id.strip():
            self.fail(f"no 'pmid' and 'doc_id' is {doc_id!r}",
                      "a 'pmid' (digits) or a non-empty 'doc_id' string", "add an id to the record")
        return doc_id.strip()

    def string(self, key: str) -> str:
        value = self.data.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.fail(f"{key!r} is a {type(value).__name__}", "a string",
                      f"store {key!r} as a JSON string")
        return value

    def string_list(self, key: str, *, pmids: bool = False) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        kinds = (str, int) if pmids else (str,)
        if not isinstance(value, list) or not all(
                isinstance(v, kinds) and not isinstance(v, bool) for v in value):
            self.fail(f"{key!r} is {json.dumps(value)[:80]}",
                      f"a list of {'PMIDs' if pmids else 'strings'}",
                      f"store {key!r} as a JSON array, e.g. [\"a\", \"b\"]")
        items = [str(v).strip() for v in value if str(v).strip()]
        bad = [v for v in items if pmids and not is_pmid(v)]
        if bad:
            self.fail(f"{key!r} holds {bad[0]!r}", "PMIDs (digits)",
                      f"remove non-PMIDs from {key!r}")
        return items

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
