"""Gold-annotated corpora for ``kbcurate match-bench``: PubTator files and BioC JSON collections.

PubTator files (BioRED, tmVar, NCBI-disease) are read by :mod:`kb_sources.pubtator`. BioC JSON
(BC6PM: ``{"documents": [{"id", "passages": [{"infons": {"type": "title"}, "offset", "text",
"annotations": [{"text", "infons": {"type", "NCBI GENE" | "identifier"}, "locations":
[{"offset", "length"}]}]}]}]}``, plain or gzip) is turned into the same :class:`Document`: the
title passage, one space, then the abstract passage(s), with annotation offsets moved onto that
text and checked against it (a mention that does not fit is skipped and counted in a warning).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kb_sources.errors import InputFormatError
from kb_sources.pubtator import entity_type, parse_ids, read_pubtator_docs
from kb_sources.types import Annotation, Document

logger = logging.getLogger(__name__)

#: Annotation infons that may hold the normalised id, first found wins.
ID_INFONS = ("identifier", "NCBI GENE", "NCBI Gene", "MESH", "MeSH", "Identifier")
_EXPECTED = ('a BioC JSON collection {"documents": [{"id": ..., "passages": [{"offset": ..., '
             '"text": ..., "annotations": [...]}]}]} or a PubTator file')


def read_bench_docs(path: str | Path) -> list[Document]:
    """Documents with gold annotations of a PubTator file or a BioC JSON collection.

    The format is told by the content: a file whose first non-blank character is ``{`` is
    BioC JSON, anything else PubTator.

    Raises:
        InputFormatError: The file is missing, unreadable, or in neither format.
    """
    p = Path(path)
    if not p.is_file():
        raise InputFormatError(p, "file not found", expected=_EXPECTED,
                               fix="give the path of a PubTator or BioC JSON file")
    if _first_char(p) == "{":
        return list(read_bioc_docs(p))
    return list(read_pubtator_docs(p, mismatch="skip"))


def _open_text(p: Path) -> Any:
    with p.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(p, "rt", encoding="utf-8")
    return p.open(encoding="utf-8")


def _first_char(p: Path) -> str:
    try:
        with _open_text(p) as fh:
            head = fh.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(p, f"cannot read the file ({exc})", expected=_EXPECTED,
                               fix="give an uncorrupted UTF-8 file (plain or gzip)") from exc
    return head.lstrip()[:1]


def read_bioc_docs(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a BioC JSON collection (see the module docstring).

    Raises:
        InputFormatError: Not JSON, or no ``documents`` list, or a document without an id.
    """
    p = Path(path)
    try:
        with _open_text(p) as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFormatError(p, f"not a readable BioC JSON file ({exc})", expected=_EXPECTED,
                               fix="give a BioC JSON collection (plain or gzip)") from exc
    documents = data.get("documents") if isinstance(data, Mapping) else None
    if not isinstance(documents, list):
        raise InputFormatError(p, "no 'documents' list at the top level", expected=_EXPECTED,
                               fix="give a BioC JSON collection, not a single document")
    skipped = 0
    for raw in documents:
        doc, bad = _bioc_document(raw, p)
        skipped += bad
        yield doc
    if skipped:
        logger.warning("%s: %d annotations skipped (offsets or text do not fit the document)",
                       p, skipped)


def _bioc_document(raw: Any, p: Path) -> tuple[Document, int]:
    doc_id = str(raw.get("id", "")).strip() if isinstance(raw, Mapping) else ""
    if not doc_id:
        raise InputFormatError(p, "a document has no 'id'", expected=_EXPECTED,
                               fix="give every BioC document its PMID as 'id'")
    passages = [ps for ps in raw.get("passages") or [] if isinstance(ps, Mapping)]
    title_ps = [ps for ps in passages if (ps.get("infons") or {}).get("type") == "title"]
    other_ps = [ps for ps in passages if ps not in title_ps]
    title = " ".join(str(ps.get("text") or "") for ps in title_ps)
    abstract = " ".join(str(ps.get("text") or "") for ps in other_ps)
    text = Document(doc_id, title, abstract).text
    annotations: list[Annotation] = []
    skipped = 0
    cursor = 0
    for ps in [*title_ps, *other_ps]:
        body = str(ps.get("text") or "")
        if not body:
            continue
        base = text.find(body, cursor)
        cursor = base + len(body) if base >= 0 else cursor
        for ann in ps.get("annotations") or []:
            built = _bioc_annotation(ann, text, base, int(ps.get("offset") or 0))
            if built is None:
                skipped += 1
            else:
                annotations.extend(built)
    return Document(doc_id, title, abstract, source=p.name.split(".")[0],
                    annotations=tuple(annotations)), skipped


def _bioc_annotation(ann: Any, text: str, base: int, passage_offset: int,
                     ) -> list[Annotation] | None:
    """The annotation's mentions on the document text, or None when one does not fit it."""
    if base < 0 or not isinstance(ann, Mapping):
        return None
    infons = ann.get("infons") or {}
    etype = entity_type(str(infons.get("type", "")))
    raw_id = next((str(infons[k]) for k in ID_INFONS if infons.get(k)), "")
    ids = parse_ids(raw_id, etype) if raw_id else ()
    locations = [loc for loc in ann.get("locations") or [] if isinstance(loc, Mapping)]
    out = []
    for loc in locations:
        start = base + int(loc.get("offset", -1)) - passage_offset
        end = start + int(loc.get("length", 0))
        if not 0 <= start < end <= len(text):
            return None
        out.append(Annotation(start, end, text[start:end], etype, ids))
    # one location must carry the annotation's text; a discontinuous one only its pieces
    if not out or (len(out) == 1 and out[0].text != str(ann.get("text", out[0].text))):
        return None
    return out
