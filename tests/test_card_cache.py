"""Rendered card parts are kept per document and highlight setting (issue 29, item 7): a label
click re-draws a card without marking its abstract and evidence again, and never shows a stale
rendering for another setting or another document."""

from __future__ import annotations

from dataclasses import replace

from curation.matching.evidence import find_evidence, render_evidence
from curation.matching.highlight import render_highlighted, slot_colours
from curation.matching.matcher import MatchKind, Span
from curation.search import cards
from curation.search.cards import RankedDoc, card_html, highlighted_html

COLOURS = slot_colours(("gene", "variant", "treatment"))
TITLE = "BRAF V600E melanoma."
ABSTRACT = "Tumours with BRAF V600E responded to dabrafenib. Cells were grown."


def _span(word: str, slot: str, entity_id: str) -> Span:
    start = f"{TITLE} {ABSTRACT}".index(word, len(TITLE))
    return Span(start, start + len(word), slot, entity_id, MatchKind.EXACT, 1.0, word)


def _doc() -> RankedDoc:
    spans = (_span("BRAF", "gene", "673"), _span("V600E", "variant", "v600e"),
             _span("dabrafenib", "treatment", "drug:dabrafenib"))
    evidence = find_evidence(TITLE, ABSTRACT, spans, ("gene", "variant"), "treatment")
    return RankedDoc("25265492", TITLE, ABSTRACT, 2014, "J", 1.0, 3, False, spans, "bm25",
                     evidence)


def test_a_card_is_rendered_once_per_document_and_setting_and_equals_the_uncached_one():
    doc = _doc()
    enabled = frozenset({"gene", "variant", "treatment"})
    direct = render_highlighted(doc.title, doc.abstract, doc.spans, COLOURS, enabled, tips=True)
    evidence = render_evidence(doc.text, doc.evidence, doc.spans, COLOURS, enabled)
    assert 'class="kb-evidence"' in evidence and "dabrafenib" in evidence
    before = (cards._highlighted.cache_info().hits, cards._evidence.cache_info().hits)
    first = card_html(doc, highlighted_html(doc, COLOURS, enabled), None, colours=COLOURS,
                      enabled_slots=enabled)
    again = card_html(doc, highlighted_html(doc, COLOURS, enabled), "partial", colours=COLOURS,
                      enabled_slots=enabled)
    after = (cards._highlighted.cache_info().hits, cards._evidence.cache_info().hits)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)  # the second card: both hits
    assert direct in first and evidence in first
    assert again == first.replace("score 1</div>", "score 1 · <span class=\"kb-grade\">"
                                  "labelled <b>partial</b></span></div>")


def test_another_setting_or_document_is_rendered_anew():
    doc = _doc()
    all_slots = highlighted_html(doc, COLOURS, {"gene", "variant", "treatment"})
    genes_only = highlighted_html(doc, COLOURS, {"gene"})
    assert 'data-slot="treatment"' in all_slots and 'data-slot="treatment"' not in genes_only
    other = replace(doc, abstract=ABSTRACT.replace("Cells", "Mice"))
    assert "Mice were grown" in highlighted_html(other, COLOURS, {"gene"})
    assert "Mice" not in genes_only


def test_record_links_are_part_of_the_rendering_key():
    from curation.matching.entity_links import Link

    doc = _doc()
    civic = Link("CIViC EID1425", "https://civicdb.org/evidence/1425/summary")
    plain = highlighted_html(doc, COLOURS, {"gene", "variant"})
    linked = highlighted_html(doc, COLOURS, {"gene", "variant"}, {"v600e": (civic,)})
    assert 'href="https://civicdb.org/evidence/1425/summary"' in linked
    assert "civicdb" not in plain and 'href="https://www.ncbi.nlm.nih.gov/gene/673"' in plain
    hits = cards._highlighted.cache_info().hits
    again = highlighted_html(doc, COLOURS, {"variant", "gene"}, {"v600e": [civic]})
    assert again == linked and cards._highlighted.cache_info().hits == hits + 1
