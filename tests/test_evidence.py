"""Evidence sentences under each result card: splitting, co-occurrence selection, rendering."""

from __future__ import annotations

import pytest

from curation.matching.evidence import (
    Evidence,
    document_sentences,
    find_evidence,
    mark_colours,
    render_evidence,
    select_evidence,
    split_sentences,
)
from curation.matching.highlight import render_highlighted, slot_colours
from curation.matching.matcher import EntityMatcher, MatchKind, Span
from curation.search.session import RankedDoc, card_html
from kb_sources.errors import CurationError
from kb_sources.types import Entity

QUERY = ("gene", "variant")
COLOURS = slot_colours(("gene", "variant", "treatment"))
ENTITIES = {"gene": (Entity("BRAF", "gene", "673"),), "variant": (Entity("V600E", "variant"),),
            "treatment": (Entity("dabrafenib", "drug"), Entity("trametinib", "drug"))}


def sentences_of(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def span(text: str, word: str, slot: str, entity_id: str = "", nth: int = 0) -> Span:
    start = -1
    for _ in range(nth + 1):
        start = text.index(word, start + 1)
    return Span(start, start + len(word), slot, entity_id or word.lower(), MatchKind.EXACT, 1.0,
                word)


def test_split_keeps_abbreviations_decimals_and_mutation_names_inside_a_sentence():
    text = ("BRAF p.V600E mutations (e.g. in melanoma) respond to vemurafenib vs. placebo "
            "(Fig. 2).  Smith et al. reported a 1.5-fold rise in ORR (P < 0.001). The "
            "c.1799T>A change, i.e. V600E, was seen in 45.2% of cases; approx. 40% of 10 pts. "
            "and ca. 20 controls responded. mTOR inhibition (cf. ref. 3) failed.\nWhy? Unknown!")
    assert sentences_of(text) == [
        "BRAF p.V600E mutations (e.g. in melanoma) respond to vemurafenib vs. placebo (Fig. 2).",
        "Smith et al. reported a 1.5-fold rise in ORR (P < 0.001).",
        "The c.1799T>A change, i.e. V600E, was seen in 45.2% of cases; approx. 40% of 10 pts. "
        "and ca. 20 controls responded.",
        "mTOR inhibition (cf. ref. 3) failed.",
        "Why?",
        "Unknown!"]


def test_split_tells_initial_like_capitals_and_lists_from_sentence_ends():
    text = ("Low vitamin D. The U.S. Food and Drug Administration approved it. This was "
            "confirmed (i) by IP and (ii) by binding. E. coli grew at 150 mg b.i.d. for 12 wk. "
            'She said "stop." β-catenin fell; p53 rose. No. 5 was given. 20 patients\n\nresponded')
    assert sentences_of(text) == [
        "Low vitamin D.",
        "The U.S. Food and Drug Administration approved it.",
        "This was confirmed (i) by IP and (ii) by binding.",
        "E. coli grew at 150 mg b.i.d. for 12 wk.",
        'She said "stop."',
        "β-catenin fell; p53 rose.",
        "No. 5 was given.",
        "20 patients",
        "responded"]


def test_split_offsets_point_into_the_text():
    text = "  Lipids were measured.  Lipids were measured.\n\nNo final stop"
    assert split_sentences(text) == [(2, 23), (25, 46), (48, 61)]
    assert split_sentences("") == [] and split_sentences("   ") == []
    assert split_sentences("one fragment") == [(0, 12)]


def test_title_and_abstract_are_split_apart():
    title, abstract = "BRAF V600E and dabrafenib", "First result. Second result."
    text = f"{title} {abstract}"
    assert [text[s:e] for s, e in document_sentences(title, abstract)] == [
        "BRAF V600E and dabrafenib", "First result.", "Second result."]
    assert document_sentences("", abstract) == [(0, 13), (14, 28)]
    assert document_sentences(title, "") == [(0, 25)]


TEXT = ("BRAF was sequenced and dabrafenib was given. "          # gene + drug
        "BRAF V600E tumours responded to dabrafenib. "           # gene + variant + drug
        "BRAF V600E was frequent. "                              # gene + variant
        "Trametinib was added.")                                 # drug only


def text_spans() -> list[Span]:
    return [span(TEXT, "BRAF", "gene", "673"), span(TEXT, "dabrafenib", "treatment"),
            span(TEXT, "BRAF", "gene", "673", 1), span(TEXT, "V600E", "variant"),
            span(TEXT, "dabrafenib", "treatment", nth=1), span(TEXT, "BRAF", "gene", "673", 2),
            span(TEXT, "V600E", "variant", nth=1), span(TEXT, "Trametinib", "treatment")]


def test_co_occurrence_sentences_ranked_by_query_slots_covered():
    found = select_evidence(split_sentences(TEXT), text_spans(), QUERY, "treatment")
    assert [TEXT[e.start:e.end] for e in found] == [
        "BRAF V600E tumours responded to dabrafenib.",
        "BRAF was sequenced and dabrafenib was given."]
    assert found[0] == Evidence(45, 88, ("gene", "variant"), ("dabrafenib",))
    assert found[1].query_slots == ("gene",) and all(e.co_occurs for e in found)
    assert select_evidence(split_sentences(TEXT), text_spans(), QUERY, "treatment", 1) == found[:1]
    assert select_evidence(split_sentences(TEXT), text_spans(), QUERY, "treatment", 0) == ()


def test_without_co_occurrence_the_sentence_with_most_query_entities_is_marked():
    spans = [s for s in text_spans() if s.slot != "treatment" or s.text == "Trametinib"]
    (only,) = select_evidence(split_sentences(TEXT), spans, QUERY, "treatment")
    assert TEXT[only.start:only.end] == "BRAF V600E tumours responded to dabrafenib."
    assert (only.query_slots, only.answers, only.co_occurs) == (("gene", "variant"), (), False)
    no_query = [s for s in text_spans() if s.slot == "treatment"]
    assert select_evidence(split_sentences(TEXT), no_query, QUERY, "treatment") == ()


def test_a_span_across_a_sentence_boundary_counts_in_neither():
    text = "BRAF is here. Dabrafenib too."
    spans = [Span(0, 4, "gene", "673", MatchKind.EXACT, 1.0, "BRAF"),
             Span(10, 24, "treatment", "x", MatchKind.FUZZY, 0.9, text[10:24])]
    (only,) = select_evidence(split_sentences(text), spans, QUERY, "treatment")
    assert (only.start, only.end, only.co_occurs) == (0, 13, False)


def test_a_negative_limit_is_refused():
    with pytest.raises(CurationError, match="Evidence limit -1 is negative"):
        select_evidence([], [], QUERY, "treatment", -1)


def ranked(title: str, abstract: str, enabled=None) -> tuple[RankedDoc, str]:
    text = f"{title} {abstract}"
    spans = tuple(EntityMatcher().find_spans(ENTITIES, text))
    evidence = find_evidence(title, abstract, spans, QUERY, "treatment")
    doc = RankedDoc("25265492", title, abstract, 2014, "J", 1.0, 1, False, spans, "bm25",
                    evidence)
    return doc, render_highlighted(title, abstract, spans, COLOURS, enabled)


def evidence_part(card: str) -> str:
    return card[card.index('<div class="kb-evidence'):]


def test_card_shows_the_evidence_escaped_with_the_abstracts_marks():
    doc, highlighted = ranked(
        "A <script>alert(1)</script> study.",
        "Cells were grown. BRAF V600E <img src=x onerror=alert(1)> tumours responded to "
        "dabrafenib & trametinib.")
    card = card_html(doc, highlighted, "complete")
    assert card.startswith('<div class="kb-meta">') and "<script>" not in card
    part = evidence_part(card)
    assert part.startswith('<div class="kb-evidence"><span class="kb-evidence-label">Evidence'
                           "</span>")
    assert "&lt;img src=x onerror=alert(1)&gt;" in part and "<img" not in part
    assert "dabrafenib</mark> &amp; <mark" in part
    assert "Cells were grown" not in part and "alert(1)</script>" not in part
    for slot in ("gene", "variant", "treatment"):
        assert (f'data-slot="{slot}" data-entity=' in part
                and f'style="background-color:{COLOURS[slot]}"' in part)


def test_evidence_marks_follow_the_slots_switched_on_above():
    doc, highlighted = ranked("BRAF V600E and dabrafenib.", "No more.", {"gene", "variant"})
    part = evidence_part(card_html(doc, highlighted))
    assert 'data-slot="gene"' in part and 'data-slot="treatment"' not in part
    assert "</mark> and dabrafenib.</div>" in part  # shown, not marked
    # a caller that knows the page's colours and toggles passes them
    part = evidence_part(card_html(doc, highlighted, colours={"treatment": "gold"}))
    assert 'data-slot="treatment"' in part and "background-color:gold" in part


def test_fallback_sentence_and_no_evidence():
    doc, highlighted = ranked("BRAF V600E in melanoma.", "Dabrafenib is a drug.")
    part = evidence_part(card_html(doc, highlighted))
    assert 'class="kb-evidence kb-evidence-weak"' in part and "Query entities only" in part
    assert ">BRAF</mark> <mark" in part and "Dabrafenib" not in part
    bare = RankedDoc("1", "Soil bacteria.", "", None, "", 1.0, 1, False, (), "bm25")
    assert "kb-evidence" not in card_html(bare, render_highlighted("Soil bacteria.", "", []))
    assert render_evidence("text", (), []) == ""


def test_mark_colours_reads_the_highlighters_marks():
    text = "BRAF V600E"
    spans = EntityMatcher().find_spans(ENTITIES, text)
    assert mark_colours(render_highlighted(text, "", spans, COLOURS)) == {
        "gene": COLOURS["gene"], "variant": COLOURS["variant"]}
    assert mark_colours("<div>[x](javascript:alert(1))</div>") == {}
