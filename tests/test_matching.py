"""The matcher: spans and kinds, EDEL's g(e, d), fuzzy guards (CTAG2 is not STAG2),
abbreviations, variants by key, and the per-document cache."""

from __future__ import annotations

import pytest

from curation.matching.abbreviations import abbreviation_map, find_abbreviations
from curation.matching.fuzzy import FuzzyVocabulary, is_near_spelling, pigeonhole_chunks
from curation.matching.matcher import (
    EntityMatcher,
    MatchConfig,
    MatchKind,
    Span,
    compile_entity,
    find_spans,
    mentions,
    resolve_overlaps,
)
from kb_sources.types import Document, Entity

BRAF = Entity("BRAF", "gene", "673", ("B-Raf", "BRAF1"))
V600E = Entity("V600E", "variant")
VEMURAFENIB = Entity("vemurafenib", "drug", "", ("PLX4032",))


@pytest.fixture(scope="module")
def matcher() -> EntityMatcher:
    return EntityMatcher()


def texts(spans: list[Span]) -> list[str]:
    return [s.text for s in spans]


# -- the EDEL failure case and other non-matches -----------------------------------------------
def test_ctag2_never_matches_stag2(matcher: EntityMatcher) -> None:
    ctag2 = Entity("CTAG2", "gene", "30848", ("cancer/testis antigen 2",))
    abstract = "Loss of STAG2 and STAG2-mutant cohesin in bladder cancer; STAG2 is a cohesin."
    assert not matcher.mentions(ctag2, abstract)
    assert matcher.spans(ctag2, abstract) == []
    assert matcher.mentions(ctag2, "CTAG2 is a cancer/testis antigen.")


def test_no_fuzzy_match_of_short_symbols(matcher: EntityMatcher) -> None:
    for symbol, other in (("CTAG2", "STAG2"), ("KRAS", "HRAS"), ("MEK1", "MEK2"),
                          ("IL6", "IL8"), ("SET", "SETD2")):
        assert not matcher.mentions(Entity(symbol, "gene"), f"We studied {other} here."), symbol


def test_short_symbols_do_not_match_english_words(matcher: EntityMatcher) -> None:
    cat = Entity("CAT", "gene", "847")
    assert not matcher.mentions(cat, "The cat sat on a set of mats.")
    assert texts(matcher.spans(cat, "CAT activity and cat")) == ["CAT"]


def test_no_match_inside_another_word(matcher: EntityMatcher) -> None:
    assert not matcher.mentions(Entity("insulin", "gene"), "proinsulin and insulinoma")
    assert not matcher.mentions(Entity("ALK", "gene"), "ALKBH5 and TALK1")


# -- kinds and offsets --------------------------------------------------------------------------
def test_spans_carry_slot_id_kind_score_and_text(matcher: EntityMatcher) -> None:
    text = "BRAF1 and BRAF; braf; Braf; B-RAF."
    spans = matcher.spans(BRAF, text, slot="gene")
    # "B-RAF" and "Braf" fold to the entity's own text (case, hyphens): exact
    assert [(s.text, s.kind, s.score) for s in spans] == [
        ("BRAF1", MatchKind.SYNONYM, 1.0), ("BRAF", MatchKind.EXACT, 1.0),
        ("Braf", MatchKind.EXACT, 1.0), ("B-RAF", MatchKind.EXACT, 1.0)]
    assert all(text[s.start:s.end] == s.text and s.slot == "gene" and s.entity_id == "673"
               for s in spans)


def test_entity_without_id_uses_its_key(matcher: EntityMatcher) -> None:
    (span,) = matcher.spans(VEMURAFENIB, "vemurafenib")
    assert span.entity_id == "drug:vemurafenib"


def test_variant_spellings_are_normalised(matcher: EntityMatcher) -> None:
    text = ("BRAF V600E (Val600Glu, p.V600E, p.Val600Glu) means valine 600 to glutamic acid; "
            "not V600K.")
    spans = matcher.spans(V600E, text, "variant")
    assert texts(spans) == ["V600E", "Val600Glu", "p.V600E", "p.Val600Glu",
                            "valine 600 to glutamic acid"]
    assert [s.kind for s in spans] == [MatchKind.EXACT] + [MatchKind.NORMALISED] * 4


def test_variant_glued_to_gene_symbol(matcher: EntityMatcher) -> None:
    spans = matcher.find_spans({"gene": [BRAF], "variant": [V600E]}, "BRAFV600E melanoma")
    assert [(s.slot, s.text) for s in spans] == [("gene", "BRAF"), ("variant", "V600E")]


def test_codon_level_record_finds_specific_changes_not_the_reverse(
        matcher: EntityMatcher) -> None:
    v600 = Entity("V600", "variant")
    assert texts(matcher.spans(v600, "V600E and V600K and V600")) == ["V600E", "V600K", "V600"]
    assert not matcher.mentions(V600E, "only V600K and V600")


@pytest.mark.parametrize(("entity", "text", "expected"), [
    (Entity("", "variant", "p|SUB|V|600|E"), "the Val600Glu change", ["Val600Glu"]),
    (Entity("", "variant", "rs113488022"), "SNP rs113488022 and rs1", ["rs113488022"]),
    (Entity("Exon 19 deletion", "variant"), "EGFR del19 and exon 19 deletions",
     ["del19", "exon 19 deletions"]),
    (Entity("EML4-ALK", "variant"), "EML4::ALK and EML4/ALK", ["EML4::ALK", "EML4/ALK"]),
    (Entity("Amplification", "variant"), "ERBB2-amplified and HER2 amplification",
     ["amplified", "amplification"]),
    (Entity("F508del", "variant"), "CFTR ΔF508 and delF508", ["ΔF508", "delF508"]),
    (Entity("MUTATION", "variant"), "BRAF-mutant melanoma; KRAS mutations",
     ["mutant", "mutations"]),
    (Entity("LOSS", "variant"), "PTEN loss", ["loss"]),
    (Entity("W288FS", "variant"), "NPM1 W288fs*12 and W288C", ["W288fs*12"]),
])
def test_variant_records_find_their_mentions(matcher: EntityMatcher, entity: Entity,
                                             text: str, expected: list[str]) -> None:
    assert texts(matcher.spans(entity, text)) == expected


def test_residue_and_ptm_entities(matcher: EntityMatcher) -> None:
    text = "Akt phosphorylated at Ser-473 (serine 473); phospho-S473 is high."
    residue = Entity("S473", "residue")
    ptm = Entity("phosphorylation", "ptm")
    assert texts(matcher.spans(residue, text)) == ["Ser-473", "serine 473", "S473"]
    assert texts(matcher.spans(ptm, text)) == ["phosphorylated", "phospho-"]


def test_greek_and_hyphen_variants(matcher: EntityMatcher) -> None:
    tnf = Entity("TNF-alpha", "gene", "7124")
    assert texts(matcher.spans(tnf, "TNFα and TNF alpha raised")) == ["TNFα", "TNF alpha"]


# -- fuzzy ----------------------------------------------------------------------------------------
def test_fuzzy_finds_near_spellings_of_long_words(matcher: EntityMatcher) -> None:
    (span,) = matcher.spans(VEMURAFENIB, "patients on vemurafinib")
    assert span.kind is MatchKind.FUZZY and span.text == "vemurafinib"
    assert span.score == pytest.approx(0.909, abs=1e-3)
    assert matcher.mentions(Entity("gefitinib", "drug"), "Gefitnib responders")


def test_fuzzy_rejects_other_words(matcher: EntityMatcher) -> None:
    assert not matcher.mentions(Entity("cholesterol", "chemical"), "cholesteryl esters")
    assert not matcher.mentions(Entity("methylation", "chemical"), "demethylation")
    assert not matcher.mentions(Entity("imatinib", "drug"), "nilotinib and dasatinib")


def test_fuzzy_can_be_switched_off() -> None:
    strict = EntityMatcher(MatchConfig(fuzzy=False))
    assert not strict.mentions(VEMURAFENIB, "vemurafinib")


def test_near_spelling_rules_and_chunks() -> None:
    assert is_near_spelling("vemurafenib", "vemurafinib")
    assert not is_near_spelling("cholesterol", "cholesteryl")
    assert not is_near_spelling("vemurafenib", "vemurafenib")
    chunks = pigeonhole_chunks("vemurafenib", 90)
    assert "".join(chunks) == "vemurafenib" and len(chunks) == 3
    assert pigeonhole_chunks("abcdef", 50) == ()
    vocabulary = FuzzyVocabulary(90, 6)
    assert vocabulary.find("gefitinib", "gefitnib and gefitinib") == {
        "gefitnib": pytest.approx(94.1, abs=0.1)}
    assert vocabulary.eligible(("kinase", "raf")) == ["kinase"]


# -- abbreviations ------------------------------------------------------------------------------
def test_abbreviation_defined_in_the_abstract() -> None:
    text = ("The epidermal growth factor receptor (EGFR) is mutated. EGFR inhibitors work; "
            "EGFRs too.")
    egfr = Entity("epidermal growth factor receptor", "gene", "1956")
    spans = EntityMatcher().spans(egfr, text)
    assert [(s.text, s.kind) for s in spans] == [
        ("epidermal growth factor receptor", MatchKind.EXACT),
        ("EGFR", MatchKind.ABBREVIATION), ("EGFR", MatchKind.ABBREVIATION)]


def test_abbreviation_gives_the_long_form_to_a_short_entity() -> None:
    text = "Tumour necrosis factor (TNF) rises. Levels of tumour necrosis factor fall."
    spans = EntityMatcher().spans(Entity("TNF", "gene"), text)
    assert [(s.text, s.kind) for s in spans] == [
        ("Tumour necrosis factor", MatchKind.ABBREVIATION), ("TNF", MatchKind.EXACT),
        ("tumour necrosis factor", MatchKind.ABBREVIATION)]


def test_no_abbreviation_from_a_partial_long_form() -> None:
    text = "insulin-like growth factor 1 (IGF-1) and IGF-1 levels"
    assert texts(EntityMatcher().spans(Entity("insulin", "gene"), text)) == ["insulin"]


def test_abbreviation_detector_on_a_blank_pipeline() -> None:
    (abbr,) = find_abbreviations("Parkinson disease (PD) is common. PD is slow.", offset=10)
    assert (abbr.short, abbr.long, abbr.short_start, abbr.long_start) == (
        "PD", "Parkinson disease", 29, 10)
    assert abbreviation_map("no parentheses here") == {}


# -- g(e, d), find_spans, cache ----------------------------------------------------------------
def test_mentions_is_g_of_entity_and_document() -> None:
    doc = Document("1", "Vemurafenib in BRAF-mutant melanoma", "V600E responds.")
    assert mentions(BRAF, doc) and mentions(V600E, doc) and mentions(VEMURAFENIB, doc)
    assert not mentions(Entity("dabrafenib", "drug"), doc)


def test_find_spans_over_slots_is_sorted() -> None:
    text = "vemurafenib for BRAF V600E"
    spans = find_spans({"treatment": [VEMURAFENIB], "gene": [BRAF], "variant": [V600E]}, text)
    assert [(s.slot, s.start) for s in spans] == [("treatment", 0), ("gene", 16),
                                                  ("variant", 21)]


def test_one_entity_never_gets_overlapping_spans(matcher: EntityMatcher) -> None:
    egfr = Entity("EGFR", "gene", "1956", ("EGFR mutation", "EGFR mutations"))
    assert texts(matcher.spans(egfr, "EGFR mutations and EGFR")) == ["EGFR mutations", "EGFR"]


def test_resolve_overlaps_prefers_leftmost_longest_then_best_kind() -> None:
    cands = [(0, 4, MatchKind.FUZZY, 0.9), (0, 4, MatchKind.EXACT, 1.0),
             (2, 9, MatchKind.EXACT, 1.0), (5, 9, MatchKind.SYNONYM, 1.0)]
    assert resolve_overlaps(cands) == [(0, 4, MatchKind.EXACT, 1.0),
                                       (5, 9, MatchKind.SYNONYM, 1.0)]


def test_document_cache_is_bounded_and_results_stable() -> None:
    small = EntityMatcher(MatchConfig(cache_size=2))
    docs = [f"BRAF case {i}" for i in range(5)]
    assert all(small.mentions(BRAF, d) for d in docs)
    assert len(small._docs) == 2
    assert small.spans(BRAF, docs[0]) == small.spans(BRAF, docs[0])


def test_compile_entity_is_cached_and_skips_empty_forms() -> None:
    entity = Entity("BRAF", "gene", "673", ("", "  ", "B-Raf"))
    assert compile_entity(entity) is compile_entity(entity)
    assert len(compile_entity(entity).patterns) == 2
