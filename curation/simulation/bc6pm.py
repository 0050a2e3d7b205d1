"""BC6PM's triage test set as one large screening list (the BioCreative VI Precision Medicine
track: does an abstract describe a mutation that affects a protein-protein interaction?).

The 1,427 abstracts of ``bc6pm/PMtask_Triage_TestSet.json.gz`` (704 relevant: ``infons.relevant``
is "yes") form one list; its static order is BM25 of the track's topic over these abstracts
(no ranker is trained for this topic), ties by PMID. The prior log-odds are the BM25 scores
standardised over the list (no label is used to set them).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from curation.screening.calibration import Calibration
from curation.simulation.lists import ScreeningList
from kb_sources.errors import CurationError
from retrievers.bm25 import BM25Retriever

#: The file under the data folder.
BC6PM_TRIAGE_TEST = Path("bc6pm") / "PMtask_Triage_TestSet.json.gz"
#: The topic the static order ranks by.
BC6PM_TOPIC = "mutation that affects a protein-protein interaction: mutations altering binding"


def read_triage(path: Path) -> list[tuple[str, str, bool]]:
    """``(pmid, title + abstract, relevant)`` of each document of a BC6PM triage file.

    Raises:
        CurationError: The file is missing, not BioC JSON, or a document lacks its id or its
            ``relevant`` infon.
    """
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CurationError(f"{path}: not a readable gzip BioC JSON file ({exc}); give "
                            "PMtask_Triage_TestSet.json.gz from the BC6PM release") from exc
    docs = data.get("documents") if isinstance(data, Mapping) else None
    if not isinstance(docs, list) or not docs:
        raise CurationError(f"{path}: no 'documents' list; give a BioC JSON collection")
    out = []
    for raw in docs:
        pmid = str(raw.get("id", "")).strip() if isinstance(raw, Mapping) else ""
        flag = str((raw.get("infons") or {}).get("relevant", "")).lower() if pmid else ""
        if flag not in ("yes", "no"):
            raise CurationError(f"{path}: document {pmid or '?'} lacks its id or "
                                "infons.relevant (yes/no); give the triage files")
        texts = [str(p.get("text") or "") for p in raw.get("passages") or []
                 if isinstance(p, Mapping)]
        out.append((pmid, " ".join(t for t in texts if t), flag == "yes"))
    return out


def bc6pm_list(data_dir: Path) -> tuple[ScreeningList, list[str], Calibration]:
    """The triage test set as a list in BM25 order, its texts and its prior.

    Raises:
        CurationError: The file is missing or malformed.
    """
    docs = read_triage(data_dir / BC6PM_TRIAGE_TEST)
    index = BM25Retriever()
    index.index([(pmid, text) for pmid, text, _ in docs], progress=False)
    scores = {h.doc_id: h.score for h in index.search(BC6PM_TOPIC, len(docs))}
    ranked = sorted(docs, key=lambda d: (-scores.get(d[0], 0.0), d[0]))
    static = np.array([scores.get(d[0], 0.0) for d in ranked], dtype=np.float64)
    spread = float(static.std()) or 1.0
    item = ScreeningList("bc6pm-triage-test", "bc6pm", tuple(d[0] for d in ranked), static,
                         np.array([d[2] for d in ranked], dtype=bool))
    return item, [d[1] for d in ranked], Calibration(-float(static.mean()) / spread,
                                                      1.0 / spread)
