"""Issue 38: curators' include / exclude keywords (saved per user and schema, marked in the
escaped card HTML only between tags), and the shown documents put in the learned order."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import numpy as np
import pytest

from curation.matching.highlight import render_highlighted
from curation.screening.order import learned_order, order_words
from curation.screening.queue import build_queue
from curation.screening.view import ORDER_STATIC, screening_view
from curation.search.keywords import (
    MAX_KEYWORDS,
    Keywords,
    get_keywords,
    mark_keywords,
    set_keywords,
    settings_key,
)
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

TAGS = re.compile(r"<[^>]*>")


def tags(markup: str) -> list[str]:
    return TAGS.findall(markup)


def test_marks_whole_words_case_insensitively_in_text_only():
    page = ('<div class="kb-title">BRAF in Melanoma</div><div class="kb-abstract">'
            'melanomas and melanoma; <mark class="kb-mark" data-slot="disease">Melanoma</mark>'
            '</div>')
    out = mark_keywords(page, Keywords(include=("melanoma",), exclude=("braf",)))
    assert out == ('<div class="kb-title"><mark class="kb-kw-exclude">BRAF</mark> in '
                   '<mark class="kb-kw-include">Melanoma</mark></div><div class="kb-abstract">'
                   'melanomas and <mark class="kb-kw-include">melanoma</mark>; <mark '
                   'class="kb-mark" data-slot="disease"><mark class="kb-kw-include">Melanoma'
                   '</mark></mark></div>')
    assert mark_keywords(page, Keywords()) == page


@pytest.mark.parametrize("word", ["<script>", '"onmouseover=', "mark", "class", "kb-mark",
                                  "data-slot", "div", "&amp;", "a&b"])
def test_hostile_keywords_never_touch_tags_or_attributes(word):
    title = 'A <script> "onmouseover= alert(1) mark class kb-mark div a&b &amp;'
    page = render_highlighted(title, "data-slot text", (), {})
    out = mark_keywords(page, Keywords(include=(word,)))
    added = [t for t in tags(out) if t not in tags(page)]
    assert set(added) <= {'<mark class="kb-kw-include">', "</mark>"}
    assert tags(out).count("</mark>") == tags(out).count('<mark class="kb-kw-include">')
    assert "<script>" not in out and '"onmouseover' not in out
    # the text a reader sees is unchanged: only marks were added
    assert html.unescape(TAGS.sub("", out)) == html.unescape(TAGS.sub("", page))
    assert '<mark class="kb-kw-include">' in out, word  # each occurs in the text once at least


def test_hostile_keyword_text_is_escaped_inside_its_mark():
    page = render_highlighted('x <script> y "onmouseover= z', "", (), {})
    out = mark_keywords(page, Keywords(include=("<script>",), exclude=('"onmouseover=',)))
    assert '<mark class="kb-kw-include">&lt;script&gt;</mark>' in out
    assert '<mark class="kb-kw-exclude">&quot;onmouseover=</mark>' in out
    assert "<script>" not in out


def test_keywords_are_never_marked_inside_an_entity_tooltip():
    from curation.matching.matcher import EntityMatcher
    from kb_sources.types import Entity

    text = "BRAF gene mutations in melanoma: NCBI data on the BRAF gene."
    spans = EntityMatcher().find_spans({"gene": [Entity("BRAF", "gene", "673")]}, text)
    page = render_highlighted("", text, spans, {"gene": "gold"}, tips=True)
    assert page.count('<span class="kb-tip" role="tooltip">') == 2
    out = mark_keywords(page, Keywords(include=("gene", "NCBI"), exclude=("BRAF",)))
    tips = re.findall(r'<span class="kb-tip" role="tooltip">.*?</a></span></span></span>', out)
    assert len(tips) == 2 and all("kb-kw-" not in tip for tip in tips)
    assert '<b class="kb-tip-name">BRAF</b>' in tips[0] and ">NCBI Gene 673</a>" in tips[0]
    # the abstract's own words outside the tips are marked as before (inside the marks too)
    assert re.findall(r'<mark class="kb-kw-(\w+)">([^<]*)</mark>', out) == [
        ("exclude", "BRAF"), ("include", "gene"), ("include", "NCBI"), ("exclude", "BRAF"),
        ("include", "gene")]


@pytest.fixture
def ws(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws:
        yield ws


def test_keywords_round_trip_per_user_and_schema(ws):
    saved = set_keywords(ws, "alice", "PO", [" BRAF ", "braf", "V600E"], ["review"])
    assert saved == Keywords(("BRAF", "V600E"), ("review",))
    assert get_keywords(ws, "alice", "PO") == saved
    assert get_keywords(ws, "bob", "PO") == Keywords()
    assert get_keywords(ws, "alice", "disease_gene") == Keywords()
    with pytest.raises(CurationError, match="both an include and an exclude"):
        set_keywords(ws, "alice", "PO", ["x"], ["X"])
    with pytest.raises(CurationError, match="empty"):
        set_keywords(ws, "alice", "PO", ["  "], [])
    with pytest.raises(CurationError, match="keep it to 60"):
        set_keywords(ws, "alice", "PO", ["a" * 61], [])
    with pytest.raises(CurationError, match="at most 50"):
        set_keywords(ws, "alice", "PO", [f"w{i}" for i in range(MAX_KEYWORDS + 1)], [])
    assert get_keywords(ws, "alice", "PO") == saved  # nothing half-written
    with ws.transaction():
        Settings(ws).put(settings_key("alice", "PO"), "{not json")
    with pytest.raises(CurationError, match="save the keyword lists again"):
        get_keywords(ws, "alice", "PO")


@dataclass(frozen=True)
class Doc:
    doc_id: str
    rank: int
    model_version: str
    order_labels: int | None = None


def test_learned_order_reorders_renumbers_and_records_the_labels_it_learned_from():
    texts = ["braf melanoma kinase", "braf melanoma inhibitor", "egfr lung cancer",
             "egfr lung tumour", "kras colon", "braf melanoma resistance"]
    ids = ["a", "b", "c", "d", "e", "f"]
    queue = build_queue("q", ids, texts, [6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    docs = [Doc(i, n + 1, "bm25+rerank") for n, i in enumerate(ids)] + [Doc("z", 7, "bm25")]
    static = screening_view(queue, [])
    assert static.order_mode == ORDER_STATIC
    assert learned_order(docs, static) == tuple(docs)
    view = screening_view(queue, [("a", "complete"), ("c", "irrelevant")])
    out = learned_order(docs, view)
    assert [d.doc_id for d in out][:4] == list(view.order)[:4]
    assert [d.doc_id for d in out][-3:] == ["a", "c", "z"]  # labelled and outside the queue
    assert [d.rank for d in out] == list(range(1, 8))
    ranked_by = {d.doc_id: d.model_version for d in docs}
    assert all(d.model_version == ranked_by[d.doc_id] for d in out)  # what ranked it stays
    assert {d.order_labels for d in out} == {2}
    assert out[0].doc_id in {"b", "f"}  # like the relevant label, unlike the irrelevant one
    more = screening_view(queue, [("a", "complete"), ("c", "irrelevant"), ("b", "partial")])
    assert {d.order_labels for d in learned_order(out, more)} == {3}  # replaced, not stacked
    assert order_words(None) == "as ranked"
    assert order_words(3) == "learned within the query after 3 labels"
    assert order_words(40, 0.8) == ("learned within the query after 40 labels (80% from a "
                                    "classifier trained on them, the rest from the ranking and "
                                    "the labels' likeness)")
    assert np.isfinite(view.remaining.expected)


def test_one_keyword_at_a_time_each_kind_on_its_own(ws):
    """Issue 44 item 8: the Curate page adds and removes one keyword at a time."""
    from curation.search.keywords import add_keyword, remove_keywords

    assert add_keyword(ws, "alice", "PO", "include", "  BRAF  V600E ") == Keywords(
        ("BRAF V600E",))
    assert add_keyword(ws, "alice", "PO", "include", "braf v600e") == Keywords(("BRAF V600E",))
    assert add_keyword(ws, "alice", "PO", "exclude", "review") == Keywords(("BRAF V600E",),
                                                                          ("review",))
    with pytest.raises(CurationError, match="An exclude keyword is empty: type a word"):
        add_keyword(ws, "alice", "PO", "exclude", "   ")
    with pytest.raises(CurationError, match="'review' is both an include and an exclude"):
        add_keyword(ws, "alice", "PO", "include", "Review")
    with pytest.raises(CurationError, match="Unknown keyword kind 'ignore'. Available "
                                            "options: include, exclude"):
        add_keyword(ws, "alice", "PO", "ignore", "x")
    assert remove_keywords(ws, "alice", "PO", "include", ["braf  V600E", "absent"]) == Keywords(
        (), ("review",))
    assert get_keywords(ws, "alice", "PO") == Keywords((), ("review",))
