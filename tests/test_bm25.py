"""BM25: the biomedical tokenizer and ranking on variant-level queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrievers import RetrieverError
from retrievers.bm25 import BM25Config, BM25Retriever
from retrievers.tokenize import BiomedTokenizer, normalise, stopword_list


@pytest.fixture(scope="module")
def tokenize() -> BiomedTokenizer:
    return BiomedTokenizer()


@pytest.mark.parametrize(("text", "whole"), [
    ("BRAF V600E", "v600e"),
    ("AKT1 Ser473 phosphorylation", "ser473"),
    ("the p.V600E substitution", "p.v600e"),
    ("EML4-ALK fusion", "eml4-alk"),
    ("c.1799T>A transversion", "c.1799t>a"),
    ("TNF-alpha levels", "tnf-alpha"),
    ("rs113488022 carriers", "rs113488022"),
    ("5-FU based chemotherapy", "5-fu"),
])
def test_biomedical_tokens_stay_whole(tokenize: BiomedTokenizer, text: str, whole: str) -> None:
    assert whole in tokenize(text)


def test_compounds_also_emit_their_parts(tokenize: BiomedTokenizer) -> None:
    assert tokenize("EML4-ALK") == ["eml4-alk", "eml4", "alk"]
    assert tokenize("p.V600E") == ["p.v600e", "v600e"]  # one-letter part "p" is left out
    assert "1799t" in tokenize("c.1799T>A")
    assert BiomedTokenizer(split_compounds=False)("EML4-ALK") == ["eml4-alk"]


def test_lowercase_stopwords_punctuation(tokenize: BiomedTokenizer) -> None:
    assert tokenize("The BRAF mutation is in the melanoma (V600E).") == \
        ["braf", "mutation", "melanoma", "v600e"]
    assert BiomedTokenizer(stopwords="none")("the BRAF") == ["the", "braf"]
    assert BiomedTokenizer(stopwords=("braf",))("the BRAF") == ["the"]


def test_unicode_dashes_and_greek_letters_normalised(tokenize: BiomedTokenizer) -> None:
    assert normalise("TNF\u2013\u03b1") == "tnf-alpha"
    assert tokenize("TNF-α") == tokenize("TNF-alpha") == ["tnf-alpha", "tnf", "alpha"]


def test_unknown_stopword_list_lists_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown stopword list 'german'. Available options: "
                                             "en, none"):
        stopword_list("german")


def test_unknown_method_lists_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown BM25 method 'okapi'.*atire.*lucene"):
        BM25Config(method="okapi")


def docs() -> list[tuple[str, str]]:
    return [
        ("k", "BRAF V600K mutation in melanoma responds to MEK inhibitors"),
        ("e", "BRAF V600E mutation in melanoma responds to vemurafenib"),
        ("a", "EML4-ALK rearranged lung cancer and crizotinib"),
        ("p", "The p.V600E substitution (c.1799T>A) in thyroid cancer"),
        ("s", "Akt is phosphorylated at Ser473 by mTORC2"),
    ]


@pytest.fixture
def bm25() -> BM25Retriever:
    retriever = BM25Retriever()
    retriever.index(docs(), progress=False)
    return retriever


def test_v600e_query_ranks_v600e_above_v600k(bm25: BM25Retriever) -> None:
    ranked = [h.doc_id for h in bm25.search("BRAF V600E", k=5)]
    assert ranked.index("e") < ranked.index("k")
    assert ranked[0] == "e"


def test_spaced_query_matches_hyphenated_fusion(bm25: BM25Retriever) -> None:
    assert bm25.search("EML4 ALK", k=1)[0].doc_id == "a"
    assert bm25.search("EML4-ALK", k=1)[0].doc_id == "a"


def test_protein_change_matches_hgvs_form(bm25: BM25Retriever) -> None:
    hits = [h.doc_id for h in bm25.search("V600E thyroid", k=5)]
    assert hits[0] == "p"
    assert bm25.search("c.1799T>A", k=1)[0].doc_id == "p"
    assert bm25.search("Ser473", k=1)[0].doc_id == "s"


def test_only_documents_sharing_a_term_are_returned(bm25: BM25Retriever) -> None:
    assert [h.doc_id for h in bm25.search("crizotinib", k=10)] == ["a"]
    assert bm25.search("imatinib", k=10) == []
    assert bm25.search("the of and", k=10) == []  # stopwords only


def test_empty_documents_are_indexed() -> None:
    retriever = BM25Retriever()
    retriever.index([("x", ""), ("y", "BRAF")], progress=False)
    assert [h.doc_id for h in retriever.search("BRAF")] == ["y"]


def test_save_writes_plain_files_and_keeps_config(bm25: BM25Retriever, tmp_path: Path) -> None:
    custom = BM25Retriever.from_options(k1=1.2, b=0.5, method="robertson")
    custom.index(docs(), progress=False)
    custom.save(tmp_path)
    names = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    assert {"retriever.json", "ids.json", "vocab.json", "token_ids.npy", "offsets.npy",
            "params.index.json", "vocab.index.json"} <= names
    manifest = json.loads((tmp_path / "retriever.json").read_text())
    assert manifest["config"]["k1"] == 1.2 and manifest["config"]["method"] == "robertson"
    loaded = BM25Retriever.load(tmp_path)
    assert loaded.config == custom.config
    assert loaded.search("BRAF V600E", k=3) == custom.search("BRAF V600E", k=3)


def test_loading_another_type_says_which(bm25: BM25Retriever, tmp_path: Path) -> None:
    from retrievers.dense import DenseRetriever

    bm25.save(tmp_path)
    with pytest.raises(RetrieverError, match="holds a 'bm25' retriever, not 'dense'.*"
                                             "load_retriever"):
        DenseRetriever.load(tmp_path)


def test_scores_equal_bm25s_built_from_plain_lists(bm25: BM25Retriever) -> None:
    """The one-document-at-a-time view gives bm25s exactly what a list of lists would."""
    import bm25s
    import numpy as np

    from retrievers.bm25 import _TokenLists

    view = _TokenLists(bm25._docs)
    assert len(view) == 5 and isinstance(view, list)
    assert list(view) == [d.tolist() for d in bm25._docs]
    assert view[1] == bm25._docs[1].tolist() and view[:2] == [d.tolist() for d in bm25._docs[:2]]
    plain = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    plain.index(([d.tolist() for d in bm25._docs], dict(bm25._vocab)), show_progress=False)
    query = [bm25._vocab[t] for t in ("braf", "v600e", "melanoma")]
    expected = plain.get_scores(query)
    got = bm25._scorer().get_scores(query)
    assert np.count_nonzero(expected) == 3  # three documents share a query term
    np.testing.assert_array_equal(got, expected)


def test_bm25s_debug_records_stay_silent_at_warning(capsys) -> None:
    """bm25s sets its own logger to DEBUG on import; the application's level must win."""
    import logging

    root = logging.getLogger()
    handler = logging.StreamHandler()  # writes to the (captured) stderr
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        logging.getLogger("bm25s").setLevel(logging.DEBUG)  # as a fresh `import bm25s` leaves it
        retriever = BM25Retriever()
        retriever.index(docs(), progress=False)
        retriever.search("BRAF", k=1)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    assert "Building index" not in capsys.readouterr().err
    assert logging.getLogger("bm25s").level == logging.NOTSET
