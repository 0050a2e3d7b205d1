"""The highlights of a labelled item on the Review page are the Curate page's
(curation/search/item_highlight.py): the same relation found again from its query key, the same
spans as ``run_search`` gives its result cards."""

from __future__ import annotations

import pytest
from app_helpers import build_app_workspace

from curation.access.users import Role, User
from curation.matching.matcher import EntityMatcher
from curation.search.indexing import get_index
from curation.search.item_highlight import item_relation, item_spans
from curation.search.session import run_search, typed_partial
from curation.search.suggestions import add_suggestion, moderate_suggestion
from curation.store.relations import Relations
from curation.store.workspace import Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    with Workspace.open(build_app_workspace(tmp_path_factory.mktemp("ws") / "ws")) as w:
        yield w


def test_item_relation_finds_kb_relations_and_typed_queries_again(ws):
    schema = ws.schemas()["PO"]
    for partial in Relations(ws).partial("PO"):
        assert item_relation(ws, schema, partial.query_key) == partial
    typed = typed_partial(ws, schema, {"gene": "KRAS", "variant": "G12C"})
    assert not any(p.query_key == typed.query_key for p in Relations(ws).partial("PO"))
    found = item_relation(ws, schema, typed.query_key)  # read back from the key: lower case
    assert found is not None and found.query_key == typed.query_key
    assert {s: [e.text for e in ents] for s, ents in found.query.items()} == {
        "gene": ["kras"], "variant": ["g12c"]}
    matcher = EntityMatcher()  # which the matcher finds as the typed words
    text = "KRAS G12C tumours"
    assert [(s.slot, s.text) for s in item_spans(ws, schema, found, "x", text, matcher)] == [
        (s.slot, s.text) for s in item_spans(ws, schema, typed, "x", text, matcher)] == [
        ("gene", "KRAS"), ("variant", "G12C")]
    assert item_relation(ws, schema, "q") is None  # neither form
    assert item_relation(ws, schema, "gene=gene:673|variant=variant:x1,variant:x2") is None


def test_item_spans_are_the_curate_cards_spans(ws):
    schema = ws.schemas()["PO"]
    (braf,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    suggestion = add_suggestion(ws, user=User("eve", Role.CURATOR), schema=schema,
                                partial=braf, pmid="90100001", answer="Imatinib",
                                answer_key="drug:imatinib", comment="one patient")
    moderate_suggestion(ws, suggestion.id, "accepted", "named in the abstract",
                      user=User("cur", Role.CURATOR))  # an accepted answer is marked as known
    matcher = EntityMatcher()
    result = run_search(ws, get_index(ws, "bm25", progress=False), schema, braf,
                        braf.render(schema).text, 5, matcher=matcher)
    assert result.docs
    for doc in result.docs:
        assert item_spans(ws, schema, braf, doc.doc_id, doc.text, matcher) == list(doc.spans)
    first = next(d for d in result.docs if d.doc_id == "90100001")
    assert {(s.slot, first.text[s.start:s.end]) for s in first.spans} >= {
        ("gene", "BRAF"), ("variant", "V600E"), ("treatment", "Imatinib")}
