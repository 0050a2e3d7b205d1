"""Answer candidates come from evidence sentences (issue 29, item 2).

A candidate of the answer type counts where it shares a sentence with the query entities; each
carries those sentences. Abstracts here are hand-written in the tests.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from app_helpers import build_app_workspace

from curation.matching.matcher import EntityMatcher
from curation.search.candidate_sentences import anchor_slots, min_query_slots
from curation.search.candidates import answer_candidates
from curation.store.relations import Relations
from curation.store.workspace import Workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = build_app_workspace(tmp_path_factory.mktemp("evidence") / "ws", bm25=False)
    with Workspace.open(root) as w:
        yield w


def ptm(ws, substrate: str, residue: str):
    partial = next(p for p in Relations(ws).partial("PTM", {"substrate": substrate})
                   if p.query["residue"][0].text == residue)
    return ws.schemas()["PTM"], partial


def found(ws, schema, partial, *docs: tuple[str, str]):
    return {c.text: c for c in answer_candidates(ws, schema, partial, list(docs),
                                                 EntityMatcher())}


LRRK2_TITLE = "LRRK2 heterodimers in Parkinson's disease (hand-made)."
LRRK2_BODY = ("Leucine-rich repeat kinase 2 (LRRK2) causes autosomal-dominant Parkinson's disease "
              "(PD). Overexpression of WT LRRK2 in HEK293 cells increased the phosphorylation "
              "level of {akt} (S473), a possible physiological substrate of LRRK2.")


@pytest.mark.parametrize("akt", ["Akt1", "AKT1"])
def test_an_enzyme_the_abstract_defines_is_a_catalyst_next_to_the_query(ws, akt):
    """AKT1 S473: "No catalyst candidate found" while abstract #1 says LRRK2 raises Akt1 S473
    phosphorylation (issue 29; failed before: no LRRK2). LRRK2 is neither a KB catalyst nor
    annotated: the abstract defines it as a kinase."""
    schema, partial = ptm(ws, "AKT1", "S473")
    text = f"{LRRK2_TITLE} {LRRK2_BODY.format(akt=akt)}"
    got = found(ws, schema, partial, ("90200001", text))
    lrrk2 = got["LRRK2"]
    assert (lrrk2.new, lrrk2.sources, lrrk2.pmids, lrrk2.with_query) == (
        True, ("abstract",), ("90200001",), True)
    assert [s.text for s in lrrk2.sentences] == [
        f"Overexpression of WT LRRK2 in HEK293 cells increased the phosphorylation level of "
        f"{akt} (S473), a possible physiological substrate of LRRK2."]
    assert lrrk2.sentences[0].query_slots == ("substrate", "ptm", "residue")
    assert lrrk2.entity.synonyms == ("Leucine-rich repeat kinase 2",)
    # "PD" (Parkinson's disease) and "WT" (wild-type) are abbreviations, but no enzymes
    assert set(got) == {"LRRK2"}


def test_an_enzyme_defined_away_from_the_query_is_no_candidate(ws):
    schema, partial = ptm(ws, "AKT1", "S473")
    text = ("Leucine-rich repeat kinase 2 (LRRK2) causes Parkinson's disease. LRRK2 binds "
            "tubulin. AKT1 S473 phosphorylation was not measured.")
    assert "LRRK2" not in found(ws, schema, partial, ("90200002", text))


def test_a_ptm_sentence_needs_the_substrate_and_the_type_or_residue(ws):
    """"phosphorylation" is in most sentences of a PTM abstract: it never anchors a sentence
    alone, and a sentence names two of substrate, type and residue."""
    schema, partial = ptm(ws, "AKT1", "S473")
    assert anchor_slots(schema) == ("substrate", "residue") and min_query_slots(schema) == 2
    text = ("PDPK1 phosphorylation was high (hand-made). AKT1 binds TBK1. "
            "MTOR phosphorylates AKT1 at S473.")
    got = found(ws, schema, partial, ("90200003", text))
    assert got["MTOR"].with_query and not got["MTOR"].new  # a known catalyst
    assert [s.text for s in got["MTOR"].sentences] == ["MTOR phosphorylates AKT1 at S473."]
    for name in ("PDPK1", "TBK1"):  # type alone; substrate alone
        assert not got[name].with_query and not got[name].new and not got[name].sentences
    assert list(got) == ["MTOR", "PDPK1", "TBK1"]  # with the query first


def test_autophosphorylation_makes_the_substrate_its_own_catalyst(ws):
    """UniProt's "by autocatalysis": CAMK2A T286 is phosphorylated by CAMK2A (failed before:
    the query entity was never a candidate)."""
    schema, partial = ptm(ws, "CAMK2A", "T286")
    assert partial.answer_texts() == ["CAMK2A"]
    text = ("Calcium signalling in neurons (hand-made). Autophosphorylation of CAMK2A at T286 "
            "makes the kinase autonomous. CAMK2A T286 phosphorylation was measured.")
    camk2a = found(ws, schema, partial, ("90200004", text))["CAMK2A"]
    assert (camk2a.sources, camk2a.new, camk2a.pmids) == (("autocatalysis",), False,
                                                          ("90200004",))
    assert [s.text for s in camk2a.sentences] == [
        "Autophosphorylation of CAMK2A at T286 makes the kinase autonomous."]
    unknown = answer_candidates(ws, schema, replace(partial, answers=()),
                                [("90200004", text)], EntityMatcher())
    assert [(c.text, c.new) for c in unknown] == [("CAMK2A", True)]
    # without a word of self-modification the substrate stays out
    assert not found(ws, schema, partial, ("90200005", "CAMK2A T286 phosphorylation rose."))


def test_a_drug_only_mentioned_elsewhere_is_listed_after_and_never_new(ws):
    schema = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    text = ("Kinase inhibitors in melanoma (hand-made). BRAF V600E melanoma responded to "
            "nilotinib. Imatinib was given to GIST patients. In V600E tumours nilotinib and "
            "trametinib were combined.")
    got = found(ws, schema, partial, ("90200006", text), ("90200007", "Imatinib alone."))
    assert list(got) == ["Nilotinib", "Trametinib", "Imatinib"]
    nilotinib, trametinib, imatinib = got.values()
    assert nilotinib.new and len(nilotinib.sentences) == 2
    assert [(s.pmid, s.query_slots) for s in nilotinib.sentences] == [
        ("90200006", ("gene", "variant")), ("90200006", ("variant",))]
    assert trametinib.with_query and not trametinib.new  # the KB has it for BRAF V600E
    assert (imatinib.with_query, imatinib.new, imatinib.pmids) == (
        False, False, ("90200006", "90200007"))  # every abstract that mentions it


def test_a_title_without_a_full_stop_is_a_sentence_of_its_own(ws):
    """Given the titles, a title that ends without "." does not run into the abstract's first
    sentence (the card's evidence splits title and abstract the same way)."""
    schema = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    title = "BRAF V600E resistance in melanoma cells"
    docs = [("90200008", f"{title} Nilotinib was given to other patients.")]
    merged = {c.text: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}
    assert merged["Nilotinib"].with_query  # one run-on "sentence" without the titles
    split = {c.text: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher(),
                                                  titles={"90200008": title})}
    assert not split["Nilotinib"].with_query and not split["Nilotinib"].new
