"""Typed identities: model versions and retriever choices parse and print in one place."""

from __future__ import annotations

import pytest

from curation.store.identities import ModelVersionId, RetrieverChoice
from kb_sources.errors import CurationError


def test_a_model_version_id_round_trips_and_orders():
    v = ModelVersionId.parse("disease_gene-edel@3")
    assert (v.schema, v.recipe, v.n, v.name) == ("disease_gene", "edel", 3, "disease_gene-edel")
    assert str(v) == "disease_gene-edel@3" and not v.is_ranker
    assert ModelVersionId.parse("PO-ranker@12").is_ranker
    assert ModelVersionId.parse("a-b-bica@2") == ModelVersionId("a-b", "bica", 2)
    assert sorted([ModelVersionId("x", "edel", 10), ModelVersionId("x", "edel", 9)])[0].n == 9


@pytest.mark.parametrize("text", ["edel@3", "disease_gene-edel", "disease_gene-edel@x", "",
                                  "dense · PO-edel@2"])
def test_a_malformed_version_is_refused_with_an_example(text):
    with pytest.raises(CurationError, match="disease_gene-edel@2"):
        ModelVersionId.parse(text)


@pytest.mark.parametrize(("text", "found"), [
    ("dense:disease_gene-edel@2:ab12cd34ef56+rerank", "disease_gene-edel@2"),
    ("ranked · PO-ranker@1", "PO-ranker@1"),
    ("PO-edel@2", "PO-edel@2"),
    ("dense:PO-edel-2-abcdef123456-0123456789ab+rerank", "PO-edel@2"),
    ("hybrid:rrf(bm25+dense:disease_gene-bica-12-abcdef123456-0123456789ab)+rerank",
     "disease_gene-bica@12"),
    ("dense:all-MiniLM-L6-v2-0123456789ab", None),
    ("hybrid:rrf", None), ("bm25+rerank", None), ("", None), (None, None),
])
def test_the_version_named_in_an_older_label_string_is_found(text, found):
    got = ModelVersionId.find(text)
    assert (None if got is None else str(got)) == found


@pytest.mark.parametrize(("text", "retriever", "version", "rerank"), [
    ("bm25", "bm25", None, False),
    ("bm25+rerank", "bm25", None, True),
    ("dense · disease_gene-edel@2", "dense", "disease_gene-edel@2", False),
    ("hybrid · active+rerank", "hybrid", "active", True),
    ("ranked · PO-ranker@4", "ranked", "PO-ranker@4", False),
])
def test_a_retriever_choice_round_trips(text, retriever, version, rerank):
    choice = RetrieverChoice.parse(text)
    assert choice.retriever == retriever and choice.rerank == rerank
    assert (None if choice.version is None else str(choice.version)) == version
    assert str(choice) == text


def test_a_choice_following_the_active_version_is_pinned():
    choice = RetrieverChoice.parse("dense · active")
    assert choice.follows_active
    pinned = choice.pinned("disease_gene-edel@5")
    assert str(pinned) == "dense · disease_gene-edel@5" and not pinned.follows_active
    assert pinned.pinned("disease_gene-edel@6") == pinned
    assert RetrieverChoice.parse("ranked · active").is_ranked


def test_a_choice_with_a_bad_version_says_so():
    with pytest.raises(CurationError, match="not a model version"):
        RetrieverChoice.parse("dense · edel")
    with pytest.raises(CurationError, match="names no retriever"):
        RetrieverChoice.parse(" · PO-edel@1")
