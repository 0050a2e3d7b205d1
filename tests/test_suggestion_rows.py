"""The suggestion rows a curator reads (issue 36 item 11): no gene in "polymerase chain
reaction", one row per entity ("IL6" and "interleukin (IL)-6"), gene families and classes never
NEW, a rejected suggestion shown as rejected.

Hand-made abstracts and relations on a bare workspace (built-in schemas, nothing imported but
what each test adds)."""

from __future__ import annotations

import pytest

from app_pages.curate_suggestions import candidates_frame, flag
from curation.access.users import Role, User
from curation.matching.lab_phrases import ANCHORS, TECHNIQUES, technique_spans
from curation.matching.matcher import EntityMatcher
from curation.search.answer_classes import AnswerKind, answer_kind
from curation.search.candidate_merge import merge_found, name_keys
from curation.search.candidate_sentences import defined_enzymes
from curation.search.candidates import answer_candidates, with_suggestions
from curation.search.suggestions import add_suggestion, moderate_suggestion
from curation.store.entities import Entities
from curation.store.relations import PartialRelation
from curation.store.suggestions import SuggestionStatus
from curation.store.workspace import Workspace
from kb_sources.types import Entity

CURATOR, ADMIN = User("cur", Role.CURATOR), User("boss", Role.ADMIN)
SEPSIS = Entity("sepsis", "disease", "D018805")


@pytest.fixture
def ws(tmp_path):
    with Workspace.init(tmp_path / "ws") as w:
        yield w


def partial(schema: str, query: dict[str, tuple[Entity, ...]],
            answers: tuple[tuple[Entity, ...], ...] = ()) -> PartialRelation:
    key = "|".join(f"{s}={e.key}" for s, ents in query.items() for e in ents)
    return PartialRelation(schema, key, query, answers, (), ("hand",), 1, {})


def genes_for_sepsis(ws, docs, kb_entities, answers=()):
    schema = ws.schemas()["disease_gene"]
    relation = partial("disease_gene", {"disease": (SEPSIS,)}, answers)
    found = answer_candidates(ws, schema, relation, docs, EntityMatcher(),
                              kb_entities=kb_entities)
    return schema, relation, found


# -- "polymerase" in "polymerase chain reaction" is not a gene ----------------------------------
POLYMERASE = Entity("polymerase", "gene", "944565")  # BioRED annotates "polymerase" as a gene


def test_a_gene_word_inside_a_technique_name_is_no_mention():
    matcher = EntityMatcher()
    pcr = "Sepsis was confirmed by polymerase chain reaction (PCR) in 20 patients."
    for text in (pcr, "RT by reverse transcription-polymerase chain reactions; western blot.",
                 "Colonies were screened by Polymerase-Chain-Reaction."):
        assert not matcher.mentions(POLYMERASE, text)
        assert matcher.spans(POLYMERASE, text) == []
    # the enzyme itself still matches, and so does an entity named after the technique
    assert matcher.mentions(POLYMERASE, "The viral polymerase was inhibited in sepsis.")
    technique = Entity("Polymerase Chain Reaction", "method", "D016133")
    assert [s.text for s in matcher.spans(technique, pcr)] == ["polymerase chain reaction",
                                                               "PCR"]


def test_every_technique_passes_the_pre_filter():
    assert all(any(a in name for a in ANCHORS) for name in TECHNIQUES)
    assert technique_spans("Cells were lysed; Western-Blotting followed.") == ((18, 34),)


def test_polymerase_chain_reaction_gives_no_gene_suggestion(ws):
    docs = [("99300001", "Sepsis was confirmed by polymerase chain reaction (PCR) in 20 "
                         "patients with sepsis.")]
    _, _, found = genes_for_sepsis(ws, docs, [POLYMERASE])
    assert found == []


def test_a_gene_word_inside_another_candidates_name_is_part_of_that_name(ws):
    """"polymerase" in "DNA polymerase gamma" names POLG, not the generic polymerase: an
    abstract that has it only inside that name does not mention it (issue 44 item 4: not even
    among the candidates only mentioned)."""
    docs = [("99300002", "Loss of mitochondrial DNA polymerase gamma worsened sepsis in mice."),
            ("99300003", "A polymerase was purified.")]
    polg = Entity("DNA polymerase gamma", "gene", "5428", ("POLG",))
    _, _, found = genes_for_sepsis(ws, docs, [POLYMERASE, polg])
    assert [(c.text, c.with_query, c.new, c.pmids) for c in found] == [
        ("DNA polymerase gamma", True, True, ("99300002",)),
        ("polymerase", False, False, ("99300003",))]
    _, _, alone = genes_for_sepsis(ws, docs[:1], [POLYMERASE, polg])
    assert [c.text for c in alone] == ["DNA polymerase gamma"]


def test_a_technique_is_not_an_enzyme_the_abstract_defines():
    text = ("Polymerase chain reaction (PCR) showed that leucine-rich repeat kinase 2 (LRRK2) "
            "phosphorylates Rab10.")
    assert [e.text for e in defined_enzymes(text, "gene", set())] == ["LRRK2"]


# -- IL6 and "interleukin (IL)-6" are one row -----------------------------------------------------
IL6_DOCS = [
    ("99300011", "Serum interleukin (IL)-6 was raised in sepsis and predicted death."),
    ("99300012", "IL6 levels rose early in sepsis."),
]


def test_il6_and_interleukin_il_6_are_one_row(ws):
    """Two KB genes (human IL6, and the mouse gene a corpus annotated as "interleukin (IL)-6"),
    different ids: the abbreviation inside the name makes them one row."""
    kb = [Entity("IL6", "gene", "3569"), Entity("interleukin (IL)-6", "gene", "16193")]
    _, _, found = genes_for_sepsis(ws, IL6_DOCS, kb)
    assert [(c.key, c.text, c.pmids, c.new) for c in found] == [
        ("gene:3569", "IL6", ("99300011", "99300012"), True)]
    assert "interleukin (IL)-6" in found[0].entity.synonyms
    assert len(candidates_frame(found)) == 1


def test_the_abbreviation_detector_merges_a_short_and_a_long_name(ws):
    docs = [("99300013", "The estrogen receptor (ER) was lost in sepsis-related tumours; ER "
                         "loss in sepsis was frequent.")]
    kb = [Entity("ER", "gene"), Entity("estrogen receptor", "gene", "2099")]
    _, _, found = genes_for_sepsis(ws, docs, kb)
    assert [(c.key, c.text) for c in found] == [("gene:2099", "estrogen receptor")]


def test_an_id_less_candidate_merges_by_the_dictionarys_id(ws):
    """A drug list's "IL6" (no id) is the dictionary's gene:3569, which a corpus annotated as
    "interleukin-6": one row, kept under the id."""
    Entities(ws).add_synonyms(Entity("interleukin-6", "gene", "3569"), ["IL6"], "gene-list")
    docs = [("99300014", "Interleukin-6 and IL6 signalling in sepsis.")]
    kb = [Entity("IL6", "gene"), Entity("interleukin-6", "gene", "3569")]
    _, _, found = genes_for_sepsis(ws, docs, kb)
    assert [(c.key, c.text) for c in found] == [("gene:3569", "interleukin-6")]


def test_genes_sharing_an_alias_stay_two_rows():
    found = {"gene:2099": (Entity("ESR1", "gene", "2099", ("ER",)), ["1"], {"kb"}),
             "gene:2069": (Entity("EREG", "gene", "2069", ("ER",)), ["1"], {"kb"})}
    merged, members = merge_found(found, {}, {})
    assert list(merged) == ["gene:2099", "gene:2069"]
    assert members == {"gene:2099": {"gene:2099"}, "gene:2069": {"gene:2069"}}
    assert name_keys("IL6", {"il": "interleukin"}) == {"il6", "interleukin6"}


# -- gene families and classes are not NEW --------------------------------------------------------
@pytest.mark.parametrize(("name", "kind"), [
    ("ALDH", AnswerKind.CLASS), ("claudin", AnswerKind.CLASS), ("claudins", AnswerKind.CLASS),
    ("estrogen receptor", AnswerKind.CLASS), ("estrogen receptors", AnswerKind.CLASS),
    ("MMPs", AnswerKind.CLASS), ("HDACs", AnswerKind.CLASS), ("integrins", AnswerKind.CLASS),
    ("toll-like receptors", AnswerKind.CLASS), ("polymerase", AnswerKind.CLASS),
    ("ALDH1A1", AnswerKind.SPECIFIC), ("claudin-4", AnswerKind.SPECIFIC),
    ("estrogen receptor alpha", AnswerKind.SPECIFIC), ("androgen receptor", AnswerKind.SPECIFIC),
    ("IL6", AnswerKind.SPECIFIC), ("KRAS", AnswerKind.SPECIFIC), ("Fas", AnswerKind.SPECIFIC),
    ("CLDN1", AnswerKind.SPECIFIC),
])
def test_gene_families_and_classes(name, kind):
    assert answer_kind(name, "gene") is kind


def test_a_gene_family_is_shown_as_a_class_never_new(ws):
    docs = [("99300021", "ALDH activity and claudin loss marked sepsis; the estrogen receptor "
                         "and ALDH1A1 were up in sepsis.")]
    kb = [Entity("ALDH", "gene", "216"), Entity("claudin", "gene"),
          Entity("estrogen receptor", "gene"), Entity("ALDH1A1", "gene", "216x")]
    _, _, found = genes_for_sepsis(ws, docs, kb)
    rows = {c.text: (c.kind, c.new, flag(c)) for c in found}
    assert rows == {"ALDH": (AnswerKind.CLASS, False, "class"),
                    "claudin": (AnswerKind.CLASS, False, "class"),
                    "estrogen receptor": (AnswerKind.CLASS, False, "class"),
                    "ALDH1A1": (AnswerKind.SPECIFIC, True, "NEW")}


# -- a rejected suggestion shows as rejected -----------------------------------------------------
def test_a_rejected_suggestion_shows_as_rejected_not_new(ws):
    docs = [("99300031", "IL6 and TNF levels rose in sepsis.")]
    kb = [Entity("IL6", "gene", "3569"), Entity("TNF", "gene", "7124")]
    schema, relation, found = genes_for_sepsis(ws, docs, kb)
    assert {c.text: flag(c) for c in found} == {"IL6": "NEW", "TNF": "NEW"}
    il6 = add_suggestion(ws, user=CURATOR, schema=schema, partial=relation, pmid="99300031",
                         answer="IL6", answer_key="gene:3569", comment="IL6 rose")
    tnf = add_suggestion(ws, user=CURATOR, schema=schema, partial=relation, pmid="99300031",
                         answer="TNF", answer_key="gene:7124", comment="TNF rose")
    found = genes_for_sepsis(ws, docs, kb)[2]
    assert {c.text: (c.suggestion, c.new, flag(c)) for c in found} == {
        "IL6": (SuggestionStatus.NEW, True, "pending"),
        "TNF": (SuggestionStatus.NEW, True, "pending")}
    moderate_suggestion(ws, il6.id, "rejected", "a marker, not a cause", user=ADMIN)
    moderate_suggestion(ws, tnf.id, "accepted", "shown", user=ADMIN)
    # a list found before the moderation (the page keeps its search) is refreshed in place
    stale = with_suggestions(ws, "disease_gene", relation.query_key, found)
    assert [(c.text, flag(c), c.new) for c in stale] == [("IL6", "rejected", False),
                                                         ("TNF", "accepted", False)]
    found = genes_for_sepsis(ws, docs, kb)[2]
    assert {c.text: (c.suggestion, c.new, flag(c)) for c in found} == {
        "IL6": (SuggestionStatus.REJECTED, False, "rejected"),
        "TNF": (SuggestionStatus.ACCEPTED, False, "accepted")}
    # another PMID's suggestion of the rejected answer, still pending, wins over the rejection
    add_suggestion(ws, user=CURATOR, schema=schema, partial=relation, pmid="99300032",
                   answer="IL6", answer_key="gene:3569", comment="IL6 again")
    (il6_row,) = [c for c in genes_for_sepsis(ws, docs, kb)[2] if c.text == "IL6"]
    assert (il6_row.suggestion, flag(il6_row)) == (SuggestionStatus.NEW, "pending")
