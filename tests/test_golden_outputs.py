"""Golden outputs of three read commands on the hand-made fixtures (issue 27 item 7).

Moving SQL into the store, typing identities and renaming registries must not change what a
user sees: ``kbcurate stats --json``, ``kbcurate relations`` and ``kbcurate evaluate --retriever
bm25`` print exactly what they printed before the refactor (recorded from main at dfba4da, with
the workspace path and timestamps replaced by placeholders).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from loop_fixtures import make_loop_workspace

from curation.cli.main import main
from curation.store.importer import import_items
from kb_sources.types import Document

#: Reviews that repeat a disease name and name other genes, so BM25 ranks them above the gold
#: abstracts for some queries and the scores are not all 1.0.
CONFUSERS = [Document(str(400 + i), f"{d} {d}: a review of {d}",
                      f"In {d}, {d} patients and {d} families; {g} was not studied in {d}.",
                      source="confuser")
             for i, (d, g) in enumerate([("melanoma", "KRAS"), ("glioma", "BRAF"),
                                         ("leukemia", "EGFR"), ("colon cancer", "RET"),
                                         ("lung cancer", "APC"), ("thyroid cancer", "NF1"),
                                         ("breast cancer", "TP53"), ("retinoblastoma", "CFTR")])]

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
#: Set to rewrite the golden files from the current code (only ever on purpose, by hand).
REWRITE = False


def _normalise(text: str, ws_root: Path) -> str:
    text = text.replace(str(ws_root), "<WS>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "<TIME>", text)
    return re.sub(r"\b\d+(\.\d+)? ?(ms|s)\b", "<DURATION>", text)


COMMANDS = {
    "stats": ["stats", "--json"],
    "relations": ["relations", "--schema", "disease_gene"],
    "relations_filtered": ["relations", "--schema", "disease_gene", "--where",
                           "disease=melanoma"],
    "evaluate_bm25": ["evaluate", "--schema", "disease_gene", "--retriever", "bm25",
                      "--split", "all", "--quiet"],
    "evaluate_bm25_rerank": ["evaluate", "--schema", "disease_gene", "--retriever",
                             "bm25+rerank", "--split", "test", "--quiet"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_read_commands_print_what_they_printed_before(name, tmp_workspace, capsys):
    ws = make_loop_workspace(tmp_workspace)
    import_items(ws, CONFUSERS, reader="test", path="confusers", progress=False)
    capsys.readouterr()
    code = main([*COMMANDS[name], "-w", str(ws.root)])
    out = _normalise(capsys.readouterr().out, ws.root)
    assert code == 0
    path = GOLDEN / f"{name}.txt"
    if REWRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert out == expected
    if name == "stats":
        json.loads(out)  # still one JSON document
