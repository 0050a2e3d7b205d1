"""MeSH descriptor UI -> name mappings for BioHiCL's entity labels (``entity_mesh``).

Entity annotations (PubTator disease and chemical mentions) name MeSH descriptors by *UI*
(``D003920``), while the workspace's MeSH tree (``mtreesYYYY.bin``) names them by *heading*
(``Diabetes Mellitus``). Two ways across:

- :func:`read_descriptor_names`: NLM's ASCII descriptor file (``dYYYY.bin``) or a TSV with
  ``descriptor_ui`` and ``descriptor`` columns. Exact; the route to use when you have the file.
- :func:`derive_descriptor_names` / :func:`descriptor_names_from_annotations` (the option value
  :data:`FROM_ANNOTATIONS`): an *adaptation* for when you do not. Each UI is named by the tree
  heading that its own mentions spell most often. A mention counts when, lower-cased with its
  whitespace collapsed, it equals a heading, the heading with a trailing ``s``/``es`` added or
  dropped, or an inverted heading read forwards ("Carcinoma, Hepatocellular" ->
  "hepatocellular carcinoma"). Each heading goes to one UI only: candidates are taken by vote
  count, highest first, and a heading already given away is skipped (then the UI's next
  candidate is tried). A UI none of whose mentions spells a heading stays unmapped and is
  counted. Documents of the reserved corpora never contribute mentions.

  On BioRED's train + dev disease and chemical annotations this names 660 of 1,065 descriptor
  UIs (746 of 1,202 with the test split); of the 38 that the pool's heading file also names, 35
  agree. The misses: *Neoplasms* is named *Carcinogenesis* (its mentions say "carcinogenesis"
  more often than "neoplasm"; "tumor" and "cancer" spell no heading), and two near-synonyms
  (*Cognition Disorders* as *Cognitive Dysfunction*). It is reported as its own source in the
  version's manifest, never passed off as NLM's mapping.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from curation.store.documents import Documents
from curation.store.mesh import Mesh
from curation.training.recipes.biohicl.mesh_inputs import (
    DESCRIPTOR_UI,
    ENTITY_TYPES,
    descriptor_ui,
    is_reserved_source,
)
from kb_sources.errors import CurationError, InputFormatError

if TYPE_CHECKING:
    from curation.store.workspace import Workspace

__all__ = ["DESCRIPTOR_UI", "FROM_ANNOTATIONS", "derive_descriptor_names", "descriptor_names",
           "descriptor_names_from_annotations", "read_descriptor_names"]

#: The ``mesh_descriptors`` value that derives the mapping from the workspace's annotations.
FROM_ANNOTATIONS = "annotations"


def read_descriptor_names(path: str | Path) -> dict[str, str]:
    """Read a MeSH descriptor UI -> name mapping.

    Two formats: NLM's ASCII descriptor file (``d2019.bin``: ``*NEWRECORD`` blocks with
    ``MH = name`` and ``UI = D000001`` lines), or a TSV with columns ``descriptor_ui`` and
    ``descriptor`` (such as ``abstract_pool/pmid_mesh_headings.tsv.gz``; rows without a UI are
    skipped). Plain or gzip.

    Returns:
        UI -> descriptor name.

    Raises:
        InputFormatError: Unreadable file, missing columns, a record without ``MH`` or ``UI``, or
            a UI that is not ``D`` + digits.
    """
    from kb_sources.io import iter_lines, iter_tsv

    p = Path(path)
    first = next((line for _, line in iter_lines(p) if line.strip()), "")
    names: dict[str, str] = {}
    if first.strip() == "*NEWRECORD":
        record: dict[str, str] = {}
        start = 0
        for line_no, line in [*iter_lines(p), (-1, "*NEWRECORD")]:
            if line.strip() == "*NEWRECORD":
                if record:
                    _add_descriptor(names, p, start, record.get("UI", ""), record.get("MH", ""))
                record, start = {}, line_no
                continue
            key, sep, value = line.partition(" = ")
            if sep and key.strip() in ("MH", "UI"):
                record[key.strip()] = value.strip()
        return names
    for line_no, row in iter_tsv(p, ("descriptor_ui", "descriptor"),
                                 format_name="MeSH descriptor TSV"):
        if row["descriptor_ui"].strip():
            _add_descriptor(names, p, line_no, row["descriptor_ui"].strip(),
                            row["descriptor"].strip())
    return names


def _add_descriptor(names: dict[str, str], path: Path, line: int, ui: str, name: str) -> None:
    if not DESCRIPTOR_UI.fullmatch(ui) or not name:
        raise InputFormatError(path, f"descriptor record without a valid UI and name (UI {ui!r}, "
                               f"name {name[:40]!r})", line=line if line > 0 else None,
                               expected="a UI such as D003920 and a descriptor name",
                               fix="use NLM's dYYYY.bin unchanged or fix the row")
    names[ui] = name


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _heading_keys(headings: Iterable[str]) -> dict[str, str]:
    """Spelling -> heading: the heading itself and, for "B, A", also "a b" (never overriding)."""
    keys: dict[str, str] = {}
    for heading in sorted(set(headings)):
        keys.setdefault(_norm(heading), heading)
    for heading in sorted(set(headings)):
        head, sep, tail = heading.partition(", ")
        if sep and ", " not in tail:
            keys.setdefault(_norm(f"{tail} {head}"), heading)
    return keys


def _spellings(mention: str) -> list[str]:
    """The forms a mention is compared under, most literal first."""
    forms = [mention]
    if mention.endswith("es"):
        forms.append(mention[:-2])
    if mention.endswith("s"):
        forms.append(mention[:-1])
    else:
        forms += [mention + "s", mention + "es"]
    return forms


def _descriptor_ids(ids: str) -> list[str]:
    try:
        values = json.loads(ids)
    except json.JSONDecodeError:
        return []
    found = (descriptor_ui(value) for value in (values if isinstance(values, list) else []))
    return [ui for ui in found if ui is not None]


def derive_descriptor_names(mentions: Iterable[tuple[str, str]], headings: Iterable[str]
                            ) -> tuple[dict[str, str], dict[str, int]]:
    """Name descriptor UIs by the tree headings their mentions spell (see the module docstring).

    Args:
        mentions: ``(mention text, ids)`` per annotation; ``ids`` is the annotation's JSON list
            (``["MESH:D003920"]``); ids that are not descriptor UIs are ignored.
        headings: The descriptor names of the MeSH tree.

    Returns:
        ``(UI -> heading, stats)``; stats count ``descriptor_ids`` (distinct UIs seen),
        ``descriptor_ids_named``, ``descriptor_ids_unnamed`` and ``mentions_matched``.
    """
    keys = _heading_keys(headings)
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    seen: set[str] = set()
    matched = 0
    for text, ids in mentions:
        uis = _descriptor_ids(ids)
        if not uis:
            continue
        seen.update(uis)
        mention = _norm(text)
        heading = next((keys[f] for f in _spellings(mention) if f in keys), None)
        if heading is None:
            continue
        matched += 1
        for ui in uis:
            votes[ui][heading] += 1
    candidates = sorted(((count, ui, heading) for ui, counter in votes.items()
                         for heading, count in counter.items()),
                        key=lambda c: (-c[0], c[1], c[2]))
    names: dict[str, str] = {}
    taken: set[str] = set()
    for _count, ui, heading in candidates:
        if ui not in names and heading not in taken:
            names[ui] = heading
            taken.add(heading)
    stats = {"descriptor_ids": len(seen), "descriptor_ids_named": len(names),
             "descriptor_ids_unnamed": len(seen) - len(names), "mentions_matched": matched}
    return dict(sorted(names.items())), stats


def descriptor_names_from_annotations(ws: Workspace, types: Iterable[str] | None = None
                                      ) -> tuple[dict[str, str], dict[str, int]]:
    """:func:`derive_descriptor_names` over a workspace's annotations and MeSH tree.

    Args:
        ws: The workspace (read only).
        types: Annotation types used, case-insensitively (default: disease and chemical).

    Raises:
        CurationError: The workspace has no MeSH tree, or no annotation (outside the reserved
            corpora) of those types carries a descriptor UI that spells a heading.
    """
    wanted = tuple(t.lower() for t in (types or ENTITY_TYPES))
    headings = Mesh(ws).headings()
    if not headings:
        raise CurationError(
            f"workspace {ws.root} has no MeSH tree (table mesh_tree is empty), so descriptor "
            "names cannot be derived from annotations; import it with `kbcurate import mesh "
            "mtrees2019.bin.gz`")
    rows = Documents(ws).annotation_mentions(wanted)
    names, stats = derive_descriptor_names(
        ((text, ids) for text, ids, source in rows if not is_reserved_source(source)), headings)
    if not names:
        raise CurationError(
            f"no {'/'.join(wanted)} annotation in workspace {ws.root} (outside the reserved "
            "corpora) carries a MeSH descriptor id whose mention spells a tree heading; import "
            "a PubTator corpus with MeSH-normalised mentions (e.g. BioRED), or pass NLM's "
            "d2019.bin as mesh_descriptors")
    return names, stats


def descriptor_names(ws: Workspace, source: str) -> tuple[dict[str, str], dict[str, object]]:
    """The mapping named by a ``mesh_descriptors`` option: a file, or :data:`FROM_ANNOTATIONS`.

    Returns:
        ``(UI -> name, provenance)``; the provenance goes into the version's manifest.
    """
    if source == FROM_ANNOTATIONS:
        names, stats = descriptor_names_from_annotations(ws)
        return names, {"source": FROM_ANNOTATIONS, **stats}
    names = read_descriptor_names(source)
    return names, {"source": Path(source).name, "descriptor_ids_named": len(names)}
