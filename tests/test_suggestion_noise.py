"""Suggestions without noise marked NEW (issue 44 item 4, seen on the demo workspace).

For variant_disease and V600E the Curate page flagged NEW "death" (of "cell death"),
"microphthalmia" (inside "micropthalmia-associated transcription factor") and the generic
"malignancies", and showed "GEP-NETs", "NET" and "intestine NETs" as three answers; for PO
(BRAF V600E) it flagged NEW dasatinib, imatinib and nilotinib from a sentence on wild-type BRAF
that never names V600E. Hand-made abstracts reproduce each cause, on a bare workspace (built-in
schemas, KB answer entities passed as the KB would give them).
"""

from __future__ import annotations

import pytest

from curation.matching.matcher import EntityMatcher
from curation.search.answer_classes import AnswerKind, answer_kind, is_generic_disease
from curation.search.candidate_merge import abbreviation_heads, singular_key
from curation.search.candidate_sentences import after_a_modifier, in_longer_name
from curation.search.candidates import answer_candidates
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.types import Entity

V600E = Entity("V600E", "variant", "rs113488022")
BRAF = Entity("BRAF", "gene", "673")
MELANOMA = Entity("melanoma", "disease", "D008545", ("melanomas",))
DEATH = Entity("death", "disease", "D003643")
MICROPHTHALMIA = Entity("microphthalmia", "disease", "D008850")
MALIGNANCIES = Entity("malignancies", "disease", "D009369", ("cancer", "cancers", "tumor"))
GEP_NETS = Entity("GEP-NETs", "disease", "C535650",
                  ("GEP-NET", "gastroenteropancreatic neuroendocrine tumors"))
NET = Entity("NET", "disease", "D018358", ("NETs",))
INTESTINE_NETS = Entity("intestine NETs", "disease", "D007414")
DRUGS = tuple(Entity(name, "drug") for name in ("Dasatinib", "Imatinib", "Nilotinib",
                                                "Vemurafenib"))


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    with Workspace.init(tmp_path_factory.mktemp("noise") / "ws") as w:
        yield w


def partial(schema: str, query: dict[str, tuple[Entity, ...]]) -> PartialRelation:
    key = "|".join(f"{s}={e.key}" for s, ents in query.items() for e in ents)
    return PartialRelation(schema, key, query, (), (), ("hand",), 1, {})


def diseases_of_v600e(ws, docs, kb):
    found = answer_candidates(ws, ws.schemas()["variant_disease"],
                              partial("variant_disease", {"variant": (V600E,)}), docs,
                              EntityMatcher(), kb_entities=kb)
    return {c.text: c for c in found}


def treatments_of_braf_v600e(ws, docs):
    found = answer_candidates(ws, ws.schemas()["PO"],
                              partial("PO", {"gene": (BRAF,), "variant": (V600E,)}), docs,
                              EntityMatcher(), kb_entities=DRUGS)
    return {c.text: c for c in found}


# -- (a) a word inside a longer name is no answer -------------------------------------------------
def test_a_disease_word_inside_a_gene_name_is_no_answer(ws):
    """"microphthalmia" in "micropthalmia-associated transcription factor" (the demo's
    26878440; failed before: NEW, with the sentence as support)."""
    docs = [("90440001", "Indole-3-carbinol down-regulated microphthalmia-associated "
                         "transcription factor (MITF) in BRAF V600E melanoma cells (hand-made).")]
    got = diseases_of_v600e(ws, docs, [MICROPHTHALMIA, MELANOMA])
    assert list(got) == ["melanoma"]  # not even among the candidates only mentioned
    assert got["melanoma"].new and got["melanoma"].pmids == ("90440001",)


def test_a_generic_word_in_a_longer_noun_phrase_is_no_mention(ws):
    """"death" of "cell death" (the demo's 22934253; failed before: NEW)."""
    docs = [("90440002", "PLX4720 did not induce cell death in BRAF(V600E) melanomas.")]
    got = diseases_of_v600e(ws, docs, [DEATH, MELANOMA])
    assert list(got) == ["melanoma"]
    assert [s.text for s in got["melanoma"].sentences] == [docs[0][1]]


@pytest.mark.parametrize(("text", "word", "inside"), [
    ("an anti-cancer phytochemical", "cancer", True),
    ("a cancer-related gene", "cancer", True),
    ("microphthalmia-associated transcription factor", "microphthalmia", True),
    ("serum tumor necrosis factor rose", "tumor", True),
    ("the melanoma antigen", "melanoma", True),
    ("V600E melanoma cells", "melanoma", False),
    ("tumours of V600E carriers", "tumours", False),
])
def test_in_longer_name(text, word, inside):
    start = text.index(word)
    assert in_longer_name(text, start, start + len(word)) is inside


@pytest.mark.parametrize(("text", "after"), [
    ("did not induce cell death", True), ("in breast cancer", True), ("led to death", False),
    ("in advanced cancer", False), ("death", False), ("BRAF V600E cancers", False)])
def test_after_a_modifier(text, after):
    assert after_a_modifier(text, text.rindex(text.split()[-1])) is after


# -- (b) generic class words are no answers on their own ------------------------------------------
def test_generic_disease_words_are_a_class_never_new(ws):
    """"malignancies" (MeSH Neoplasms, whose synonyms are "cancer", "tumor") and "death"
    (failed before: both specific and NEW)."""
    docs = [("90440003", "BRAF V600E cancers and other V600E malignancies were sequenced. "
                         "V600E carriers had a higher risk of death.")]
    got = diseases_of_v600e(ws, docs, [MALIGNANCIES, DEATH])
    assert [(c.text, c.kind, c.new, c.with_query) for c in got.values()] == [
        ("death", AnswerKind.CLASS, False, True), ("malignancies", AnswerKind.CLASS, False, True)]


@pytest.mark.parametrize(("name", "generic"), [
    ("malignancies", True), ("Cancer", True), ("solid tumours", True), ("death", True),
    ("human cancers", True), ("melanoma", False), ("lung cancer", False), ("GEP-NETs", False),
    ("Colorectal Cancer", False)])
def test_is_generic_disease(name, generic):
    assert is_generic_disease(name) is generic
    assert answer_kind(name, "disease") is (AnswerKind.CLASS if generic else AnswerKind.SPECIFIC)


# -- (c) an abbreviation, its parts and plurals are one suggestion -------------------------------
GEP_TITLE = "BRAF V600E in gastroenteropancreatic neuroendocrine tumors (hand-made)."
GEP_BODY = ("Genomic profiles of gastroenteropancreatic neuroendocrine tumors (GEP-NETs) are "
            "poorly understood. One small intestinal G1 NET patient with BRAF V600E progressed. "
            "We found BRAF V600E in two small intestine NETs and in metastatic GEP-NETs.")


def test_an_abbreviation_and_its_head_are_one_suggestion(ws):
    """GEP-NETs, NET and intestine NETs: three MeSH ids that BioRED gives the one disease of
    26684240 (failed before: three rows)."""
    docs = [("90440004", f"{GEP_TITLE} {GEP_BODY}")]
    got = diseases_of_v600e(ws, docs, [GEP_NETS, NET, INTESTINE_NETS])
    (row,) = got.values()
    assert (row.text, row.new, row.pmids) == ("GEP-NETs", True, ("90440004",))
    assert set(row.merged) == {"disease:C535650", "disease:D018358", "disease:D007414"}
    assert [s.text for s in row.sentences] == [
        GEP_TITLE, "One small intestinal G1 NET patient with BRAF V600E progressed.",
        "We found BRAF V600E in two small intestine NETs and in metastatic GEP-NETs."]


def test_plurals_and_compound_heads_fold():
    assert [singular_key(n) for n in ("GEP-NETs", "NET", "melanomas", "malignancies", "KRAS",
                                      "virus")] == ["gepnet", "net", "melanoma", "malignancy",
                                                    "kras", "virus"]
    from curation.matching.abbreviations import compound_abbreviations

    (abbr,) = compound_abbreviations(GEP_BODY)
    assert (abbr.short, abbr.long) == ("GEP-NETs", "gastroenteropancreatic neuroendocrine tumors")
    assert abbreviation_heads([abbr]) == {"net": "gepnet"}


# -- (d) evidence names the variant, not merely the gene ------------------------------------------
def test_a_sentence_on_wild_type_braf_is_no_evidence_for_braf_v600e(ws):
    """The demo's 22169110 never names V600E (failed before: dasatinib, imatinib and nilotinib
    NEW for BRAF V600E)."""
    docs = [("90440005", "Imatinib, nilotinib and dasatinib drive paradoxical activation of "
                         "wild-type BRAF and CRAF in leukemia cells (hand-made).")]
    got = treatments_of_braf_v600e(ws, docs)
    assert [(c.text, c.with_query, c.new) for c in got.values()] == [
        ("Dasatinib", False, False), ("Imatinib", False, False), ("Nilotinib", False, False)]


def test_a_sentence_right_after_the_variant_counts_unless_it_says_wild_type(ws):
    text = ("BRAF V600E melanoma was studied (hand-made). These BRAF-mutant tumours responded "
            "to vemurafenib. In contrast, wild-type BRAF cells responded to imatinib. "
            "Nilotinib was tested in BRAF amplified cells.")
    got = treatments_of_braf_v600e(ws, [("90440006", text)])
    vemurafenib = got["Vemurafenib"]
    assert (vemurafenib.new, [s.text for s in vemurafenib.sentences]) == (
        True, ["These BRAF-mutant tumours responded to vemurafenib."])
    assert vemurafenib.sentences[0].query_slots == ("gene",)
    for name in ("Imatinib", "Nilotinib"):  # wild-type; two sentences away from V600E
        assert not got[name].with_query and not got[name].new
