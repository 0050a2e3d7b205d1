"""Issue 14, bug 9 "Highlighting gaps": workspace synonyms reach the highlighted entities (the
abstract need not say the symbol), spans are well-formed phrases ("EGF) receptor" never is), and a
residue is a whole token (S65 is not highlighted inside S65A)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curation.matching.abbreviations import balanced_long_form, find_abbreviations
from curation.matching.highlight import render_highlighted
from curation.matching.matcher import EntityMatcher, MatchKind, Span
from curation.matching.normalize import is_well_formed, unmatched_brackets
from curation.store.entities import Entities
from curation.store.importer import import_file
from curation.store.relations import Relations
from kb_sources.types import Document, Entity

FIXTURES = Path(__file__).parent / "fixtures"
EGFR = Entity("EGFR", "gene", "1956", ("EGF receptor", "epidermal growth factor receptor"))


@pytest.fixture(scope="module")
def matcher() -> EntityMatcher:
    return EntityMatcher()


def found(spans: list[Span]) -> list[tuple[int, int, str, MatchKind]]:
    return [(s.start, s.end, s.text, s.kind) for s in spans]


# -- 1. workspace synonyms, the symbol absent -------------------------------------------------
@pytest.fixture
def civic_ws(tmp_workspace):
    """The CIViC sample (EGFR L858R -> gefitinib | erlotinib) plus synonyms from the workspace:
    a curator's and a term list's, which no KB record carries."""
    import_file(tmp_workspace, "kb", "civic", FIXTURES / "civic_v1_sample.tsv", progress=False)
    Entities(tmp_workspace).add_curator_synonym("gene:1956", "epidermal growth factor receptor",
                                                "ana")
    Entities(tmp_workspace).add_synonyms(Entity("EGFR", "gene", "1956"), ["EGF receptor"], "mesh")
    Entities(tmp_workspace).add_synonyms(Entity("Gefitinib", "drug"), ["ZD1839"], "mesh")
    return tmp_workspace


def test_partial_relation_entities_carry_the_workspace_synonyms(civic_ws) -> None:
    (partial,) = Relations(civic_ws).partial("PO", {"gene": "EGFR"})
    (gene,) = partial.query["gene"]
    assert gene == Entity("EGFR", "gene", "1956",
                          ("EGF receptor", "epidermal growth factor receptor"))
    assert gene == Entities(civic_ws).get("gene:1956")
    assert [[(e.text, e.synonyms) for e in ents] for ents in partial.answers] == [
        [("Gefitinib", ("ZD1839",))], [("Erlotinib", ())]]
    assert partial.query["variant"] == (Entity("L858R", "variant"),)


def test_workspace_synonyms_are_highlighted_when_the_text_never_says_the_symbol(
        civic_ws, matcher: EntityMatcher) -> None:
    (partial,) = Relations(civic_ws).partial("PO", {"gene": "EGFR"})
    doc = Document("1", "Signalling of the epidermal growth factor receptor",
                   "The EGF receptor L858R mutant responds to ZD1839.")
    assert "EGFR" not in doc.text
    slots = {**partial.query, "treatment": partial.answers[0]}
    assert [(s.slot, s.start, s.end, s.text, s.kind) for s in matcher.find_spans(slots, doc)] == [
        ("gene", 18, 50, "epidermal growth factor receptor", MatchKind.SYNONYM),
        ("gene", 55, 67, "EGF receptor", MatchKind.SYNONYM),
        ("variant", 68, 73, "L858R", MatchKind.EXACT),
        ("treatment", 93, 99, "ZD1839", MatchKind.SYNONYM)]


def test_synonym_next_to_an_abbreviation_that_is_not_the_symbol(matcher: EntityMatcher) -> None:
    text = "Mutations of the epidermal growth factor receptor (EGF receptor) gene."
    assert found(matcher.spans(EGFR, text)) == [
        (17, 49, "epidermal growth factor receptor", MatchKind.SYNONYM),
        (51, 63, "EGF receptor", MatchKind.SYNONYM)]


# -- 2. well-formed spans ---------------------------------------------------------------------
NESTED = "the epidermal growth factor (EGF) receptor (EGFR) is mutated; EGFR"


def test_brackets_of_a_phrase() -> None:
    assert unmatched_brackets("EGF) receptor") == (1, 0)
    assert unmatched_brackets("receptor (EGFR") == (0, 1)
    assert unmatched_brackets("factor (EGF) receptor [1]") == (0, 0)
    assert unmatched_brackets("(a]") == (1, 1)
    assert is_well_formed("p.(Val600Glu)") and not is_well_formed("EGF) receptor")


def test_long_form_starting_inside_a_parenthesis_is_widened_to_the_phrase() -> None:
    by_short = {a.short: a for a in find_abbreviations(NESTED, offset=100)}
    assert (by_short["EGFR"].long, by_short["EGFR"].long_start, by_short["EGFR"].long_end) == (
        "epidermal growth factor (EGF) receptor", 104, 142)
    assert (by_short["EGF"].long, by_short["EGF"].long_start) == ("epidermal growth factor", 104)
    assert balanced_long_form(NESTED, "EGFR", 29, 42) == (4, 42)
    assert balanced_long_form(NESTED, "EGFR", 4, 42) == (4, 42)


def test_long_form_without_a_word_to_widen_to_is_dropped() -> None:
    text = "mutant (EGF) receptor and (EGF receptor)"
    assert balanced_long_form(text, "EGF receptor", 8, 25) is None
    assert find_abbreviations(text) == ()
    assert balanced_long_form("receptor (EGFR", "EGFR", 0, 14) is None


def test_abbreviation_span_is_the_whole_phrase_not_egf_close_receptor(
        matcher: EntityMatcher) -> None:
    assert found(matcher.spans(Entity("EGFR", "gene", "1956"), NESTED)) == [
        (4, 42, "epidermal growth factor (EGF) receptor", MatchKind.ABBREVIATION),
        (44, 48, "EGFR", MatchKind.EXACT), (62, 66, "EGFR", MatchKind.EXACT)]
    text = "The receptor for epidermal growth factor (EGF) receptor (EGFR) binds."
    assert found(matcher.spans(EGFR, text)) == [
        (17, 55, "epidermal growth factor (EGF) receptor", MatchKind.ABBREVIATION),
        (57, 61, "EGFR", MatchKind.EXACT)]


def test_no_span_from_a_malformed_abbreviation(matcher: EntityMatcher) -> None:
    text = "mutant (EGF) receptor and (EGF receptor)"
    assert found(matcher.spans(Entity("EGF receptor", "gene"), text)) == [
        (27, 39, "EGF receptor", MatchKind.EXACT)]


def test_a_malformed_synonym_gives_no_span(matcher: EntityMatcher) -> None:
    # a harvested mention text cut at a bracket: its span would close a parenthesis it never
    # opened
    entity = Entity("EGFR", "gene", "1956", ("EGF) receptor",))
    text = "the epidermal growth factor (EGF) receptor binds EGF"
    assert matcher.spans(entity, text) == []


@pytest.mark.parametrize("text", [
    NESTED,
    "The receptor for epidermal growth factor (EGF) receptor (EGFR) binds.",
    "mutant (EGF) receptor and (EGF receptor)",
    "Binding of epidermal growth factor (EGF) to the EGF receptor (EGFR).",
    "the human epidermal growth factor receptor 2 (HER2; ERBB2) and EGF receptor (EGFR/ERBB1)",
])
def test_every_span_is_well_formed(matcher: EntityMatcher, text: str) -> None:
    entities = [EGFR, Entity("EGFR", "gene", "1956"), Entity("EGF receptor", "gene"),
                Entity("EGF", "gene", "1950", ("epidermal growth factor",))]
    spans = [s for e in entities for s in matcher.spans(e, text)]
    assert spans
    assert all(is_well_formed(s.text) and text[s.start:s.end] == s.text for s in spans)


# -- 3. residues are whole tokens -------------------------------------------------------------
RESIDUE_TEXT = ("PINK1 makes pS65 (Ser65, S65) of ubiquitin; the S65A and Ser65Ala mutants, S650 "
                "and pS65A did not, nor S65E; p-Ser65-Ub did.")


@pytest.mark.parametrize(("entity", "kinds"), [
    (Entity("S65", "residue"), (MatchKind.NORMALISED, MatchKind.NORMALISED, MatchKind.EXACT,
                                MatchKind.NORMALISED)),
    (Entity("Ser65", "site"), (MatchKind.NORMALISED, MatchKind.EXACT, MatchKind.NORMALISED,
                               MatchKind.NORMALISED)),
])
def test_residue_is_not_highlighted_inside_a_substitution(
        matcher: EntityMatcher, entity: Entity, kinds: tuple[MatchKind, ...]) -> None:
    spans = matcher.spans(entity, RESIDUE_TEXT)
    assert [(s.start, s.end, s.text) for s in spans] == [
        (12, 16, "pS65"), (18, 23, "Ser65"), (25, 28, "S65"), (109, 116, "p-Ser65")]
    assert tuple(s.kind for s in spans) == kinds


def test_a_substitution_alone_does_not_mention_the_residue(matcher: EntityMatcher) -> None:
    s65 = Entity("S65", "residue")
    assert not matcher.mentions(s65, "The S65A mutant and Ser65Ala and S650 and pS65A")
    assert matcher.mentions(s65, "phosphorylated at serine 65.")


def test_codon_level_variant_still_finds_its_substitutions(matcher: EntityMatcher) -> None:
    spans = matcher.spans(Entity("S65", "variant"), "S65A and Ser65Ala and S650")
    assert [(s.start, s.end, s.text) for s in spans] == [(0, 4, "S65A"), (9, 17, "Ser65Ala")]


def test_highlighted_html_marks_the_residue_not_the_mutant(matcher: EntityMatcher) -> None:
    doc = Document("1", "S65A blocks it", "pS65 rises.")
    spans = matcher.find_spans({"residue": [Entity("S65", "residue")]}, doc)
    out = render_highlighted(doc.title, doc.abstract, spans, {"residue": "gold"})
    assert out.count("<mark ") == 1
    assert '<div class="kb-title">S65A blocks it</div>' in out
    assert '<div class="kb-abstract"><mark ' in out and ">pS65</mark> rises.</div>" in out
