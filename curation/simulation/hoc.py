"""The Hallmarks of Cancer corpus (Baker et al. 2016, "Automatic semantic classification of
scientific literature according to the hallmarks of cancer", Bioinformatics 32:432) as ten
screening lists, one per top-level hallmark.

``hoc/hoc_abstracts.jsonl.gz`` holds 1,852 abstracts with hallmark labels per sentence
(``labels_raw``: one ``<``-separated label string per sentence, several joined by ``AND``,
``Hallmark--subclass``). An abstract is relevant to a hallmark when a sentence carries it (or
one of its subclasses); each hallmark's list is all 1,852 abstracts in the BM25 order of the
hallmark's name (105-462 relevant per list; no ranker is trained here). Each list's prior is
the BM25 score calibrated (score and rank, :func:`~curation.screening.calibration.fit_calibration`)
on the other nine lists, so no list's own labels set its prior.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from curation.screening.calibration import Calibration, fit_calibration
from curation.simulation.lists import ScreeningList
from kb_sources.errors import CurationError
from retrievers.bm25 import BM25Retriever

#: The file under the data folder.
HOC_FILE = Path("hoc") / "hoc_abstracts.jsonl.gz"
#: Labels that name no hallmark.
_NO_HALLMARK = {"", "NULL"}


def read_hoc(path: Path) -> list[tuple[str, str, frozenset[str]]]:
    """``(pmid, text, top-level hallmarks)`` of each abstract of the HoC file.

    Raises:
        CurationError: The file is missing or a line is not an abstract.
    """
    out = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                row = json.loads(line)
                if not isinstance(row, Mapping) or "pmid" not in row:
                    raise CurationError(f"{path}:{n}: no pmid; give hoc_abstracts.jsonl.gz")
                labels = str(row.get("labels_raw") or "").split("<")[1:]
                marks = {part.split("--")[0].strip() for s in labels for part in s.split("AND")}
                out.append((str(row["pmid"]), " ".join(row.get("sentences") or []),
                            frozenset(marks - _NO_HALLMARK)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CurationError(f"{path}: not a readable HoC file ({exc}); give "
                            "hoc/hoc_abstracts.jsonl.gz from the data folder") from exc
    return out


def hoc_lists(data_dir: Path) -> tuple[list[ScreeningList], dict[str, str],
                                       dict[str, Calibration]]:
    """One list per hallmark (most relevant first), each abstract's text by PMID, and each
    list's leave-one-list-out calibration (by hallmark).

    Raises:
        CurationError: The file is missing or malformed.
    """
    docs = sorted(read_hoc(data_dir / HOC_FILE))
    index = BM25Retriever()
    index.index([(pmid, text) for pmid, text, _ in docs], progress=False)
    counts = Counter(mark for _, _, marks in docs for mark in marks)
    lists = []
    for mark, _ in counts.most_common():
        scores = {h.doc_id: h.score for h in index.search(mark, len(docs))}
        ranked = sorted(docs, key=lambda d: (-scores.get(d[0], 0.0), d[0]))
        lists.append(ScreeningList(
            mark, "hoc", tuple(d[0] for d in ranked),
            np.array([scores.get(d[0], 0.0) for d in ranked], dtype=np.float64),
            np.array([mark in d[2] for d in ranked], dtype=bool)))
    calibrations = {
        x.qid: fit_calibration([o.static for o in lists if o is not x],
                               [o.relevant for o in lists if o is not x]) for x in lists}
    return lists, {d[0]: d[1] for d in docs}, calibrations

