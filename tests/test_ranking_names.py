"""The curator's name of what ranked a list (issue 36, item 10): no internal label string, no hex
digest reaches the Curate page."""

from __future__ import annotations

import re

import pytest

from curation.search.ranking_names import ranking_label


@pytest.mark.parametrize(("label", "name"), [
    ("hybrid:rrf(bm25+dense:disease_gene-minilm-1-1377e9af0ca0-0123456789ab)",
     "hybrid of BM25 and disease_gene-minilm@1"),
    ("hybrid:rrf(bm25+dense:disease_gene-minilm-1-1377e9af0ca0-0123456789ab)+rerank",
     "hybrid of BM25 and disease_gene-minilm@1 + entity rerank"),
    ("hybrid:score(bm25+dense:PO-edel-2-abcdef123456-0123456789ab)",
     "hybrid (score fusion) of BM25 and PO-edel@2"),
    ("hybrid:rrf(bm25+dense:all-MiniLM-L6-v2-0123456789ab)",
     "hybrid of BM25 and all-MiniLM-L6-v2"),
    ("bm25", "BM25"),
    ("bm25+rerank", "BM25 + entity rerank"),
    ("tantivy", "BM25 (tantivy)"),
    ("dense:PO-edel-2-abcdef123456-0123456789ab", "dense PO-edel@2"),
    ("dense:PO-edel-2-abcdef123456-onnx-int8-0123456789ab+rerank",
     "dense PO-edel@2 + entity rerank"),
    ("dense:all-MiniLM-L6-v2-0123456789ab", "dense all-MiniLM-L6-v2"),
    ("dense:disease_gene-edel@2:ab12cd34ef56", "dense disease_gene-edel@2"),
    ("ranked · PO-ranker@2", "learned ranker PO-ranker@2"),
    ("ranked · active", "learned ranker (active version)"),
    ("PO-edel@3", "PO-edel@3"),
    ("", "an unknown ranking"),
    (None, "an unknown ranking"),
])
def test_a_model_version_label_reads_as_a_curators_name(label, name):
    assert ranking_label(label) == name


def test_no_digest_or_internal_syntax_is_left():
    text = ranking_label("hybrid:rrf(bm25+dense:disease_gene-minilm-1-1377e9af0ca0-"
                         "5d1c2e3f4a5b)+rerank")
    assert not re.search(r"[0-9a-f]{12}|rrf|dense:|\(|\)", text), text
