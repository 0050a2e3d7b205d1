"""PubMed queries from partial relations (issue 37 item 1), on real CIViC, OncoKB, UniProt and
generic-TSV relations imported with the project's readers (fails, never skips, without the data).

Exact query texts for a few relations; structural properties (balanced brackets, every slot
accounted for, no empty clause, no character that breaks E-utilities syntax) for many.
"""

from __future__ import annotations

import re

import pytest

from curation.matching.notations import expand_variant, fusion_partners, protein_forms
from curation.pubmed import forms
from curation.pubmed.query import (
    PubmedQuery,
    build_pubmed_query,
    partial_pubmed_query,
    relation_pubmed_query,
)
from curation.store.entities import Entities
from curation.store.importer import import_file
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity

CIVIC = "civic/01-Aug-2021-ClinicalEvidenceSummaries.tsv.gz"
BRAF_V600E = ('("BRAF"[tiab] OR "B-Raf"[tiab]) AND ("V600E"[tiab] OR "Val600Glu"[tiab] OR '
              '"p.V600E"[tiab] OR "p.Val600Glu"[tiab])')
_TERM = re.compile(r'"([^"]*)"\[tiab\]')


def _workspace(tmp_path_factory, name, *imports, schema=None):
    ws = Workspace.init(tmp_path_factory.mktemp(name) / "ws")
    if schema is not None:
        ws.add_schema(schema)
    for reader, path, options in imports:
        import_file(ws, "kb", reader, path, progress=False, **options)
    return ws


@pytest.fixture(scope="module")
def civic_ws(data_dir, tmp_path_factory):
    """The whole real CIViC export (about a second to import)."""
    ws = _workspace(tmp_path_factory, "civic", ("civic", data_dir / CIVIC, {}))
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def civic(civic_ws):
    """(gene, variant) -> the CIViC partial relation, for single-entity slots."""
    return {(p.query["gene"][0].text, p.query["variant"][0].text): p
            for p in Relations(civic_ws).partial("PO")
            if len(p.query["gene"]) == 1 and len(p.query["variant"]) == 1}


def _query(ws, partials, gene, variant, **kw) -> PubmedQuery:
    query = partial_pubmed_query(ws, partials[(gene, variant)], **kw)
    assert_well_formed(query)
    return query


def assert_well_formed(query: PubmedQuery) -> None:
    """Brackets balance outside the quoted terms, every slot is in the query or says why not,
    every form is searched, no term is empty or holds a character E-utilities reads."""
    outside = _TERM.sub("T", query.text)
    assert '"' not in outside and "[" not in outside, query.text
    depth = 0
    for ch in outside:
        depth += (ch == "(") - (ch == ")")
        assert depth >= 0, query.text
    assert depth == 0 and "()" not in outside, query.text
    assert re.fullmatch(r"[()T ]*(?:(?:AND|OR)[()T ]*)*", outside), query.text
    terms = _TERM.findall(query.text)
    assert terms and all(t.strip() == t and sum(c.isalnum() for c in t) >= 2 for t in terms)
    assert not any(set(t) & set('[]()*#;:|&"') for t in terms), terms
    for slot in query.slots:
        assert slot.clause or slot.note, slot  # left out: the note says why
        assert not slot.clause or slot.forms
        assert all(f'"{form}"[tiab]' in query.text for form in slot.forms), slot
        assert len({f.casefold() for f in slot.forms}) == len(slot.forms)
    assert set(terms) == {form for slot in query.slots for form in slot.forms}


# -- CIViC: exact queries --------------------------------------------------------------------


def test_braf_v600e_point_mutation(civic_ws, civic):
    query = _query(civic_ws, civic, "BRAF", "V600E")
    assert query.text == BRAF_V600E
    gene, variant = query.slots
    assert (gene.slot, gene.text, gene.forms) == ("gene", "BRAF", ("BRAF", "B-Raf"))
    assert variant.forms == ("V600E", "Val600Glu", "p.V600E", "p.Val600Glu")
    assert variant.clause == ('("V600E"[tiab] OR "Val600Glu"[tiab] OR "p.V600E"[tiab] OR '
                              '"p.Val600Glu"[tiab])')


def test_typed_texts_resolve_to_the_same_query(civic_ws):
    typed = build_pubmed_query(civic_ws, "po", {"gene": "braf", "variant": "p.Val600Glu"})
    assert typed.text == BRAF_V600E
    assert [s.text for s in typed.slots] == ["braf", "p.Val600Glu"]  # what the curator gave
    assert build_pubmed_query(civic_ws, "PO", {"gene": "BRAF", "variant": "V600E"}) == \
        build_pubmed_query(civic_ws, "PO", {"gene": "BRAF", "variant": "V600E"})


def test_eml4_alk_fusion_leaves_the_gene_to_the_fusion(civic_ws, civic):
    query = _query(civic_ws, civic, "ALK", "EML4-ALK")
    assert query.text == '("EML4-ALK"[tiab] OR "EML4/ALK"[tiab] OR "EML4 ALK"[tiab])'
    gene = query.slots[0]
    assert gene.clause == "" and gene.forms == ()
    assert "fusion EML4-ALK names ALK" in gene.note


def test_bcr_abl_with_a_change_names_the_official_symbol_too(civic_ws, civic):
    query = _query(civic_ws, civic, "ABL1", "BCR-ABL T315I")
    assert query.text == (
        '("BCR-ABL"[tiab] OR "BCR-ABL1"[tiab] OR "BCR/ABL"[tiab] OR "BCR/ABL1"[tiab] OR '
        '"BCR ABL"[tiab] OR "BCR ABL1"[tiab]) AND ("T315I"[tiab] OR "Thr315Ile"[tiab] OR '
        '"p.T315I"[tiab] OR "p.Thr315Ile"[tiab])')
    assert "ANDed" in query.slots[1].note


def test_amplification_is_searched_as_the_words_papers_use(civic_ws, civic):
    query = _query(civic_ws, civic, "MET", "AMPLIFICATION")
    assert query.text == ('("MET"[tiab] OR "c-Met"[tiab]) AND ("amplification"[tiab] OR '
                          '"amplifications"[tiab] OR "amplified"[tiab] OR '
                          '"copy number gain"[tiab])')


def test_expression_is_dropped_as_noise_with_a_note(civic_ws, civic):
    query = _query(civic_ws, civic, "CD274", "EXPRESSION")
    assert query.text == '"CD274"[tiab]'
    variant = query.slots[1]
    assert variant.clause == "" and "would only add noise" in variant.note


def test_class_fusions_exon_changes_and_itd(civic_ws, civic):
    assert _query(civic_ws, civic, "ALK", "ALK FUSIONS").text == (
        '"ALK"[tiab] AND ("fusion"[tiab] OR "fusions"[tiab] OR "rearrangement"[tiab] OR '
        '"rearrangements"[tiab] OR "rearranged"[tiab] OR "translocation"[tiab])')
    assert _query(civic_ws, civic, "EGFR", "EXON 19 DELETION").text == (
        '"EGFR"[tiab] AND ("exon 19 deletion"[tiab] OR "exon 19 deletions"[tiab] OR '
        '"exon 19 del"[tiab] OR "ex19del"[tiab] OR "exon19del"[tiab] OR "del19"[tiab])')
    assert _query(civic_ws, civic, "FLT3", "ITD").slots[1].forms == (
        "ITD", "FLT3-ITD", "internal tandem duplication", "internal tandem duplications")
    assert "METex14" in _query(civic_ws, civic, "MET", "EXON 14 SKIPPING MUTATION").text


def test_codon_gets_the_changes_the_kb_records_for_the_gene(civic_ws, civic):
    variant = _query(civic_ws, civic, "BRAF", "V600").slots[1]
    assert variant.forms[:3] == ("V600", "Val600", "codon 600")
    assert {"V600E", "V600K"} <= set(variant.forms)
    assert variant.forms.index("V600E") < variant.forms.index("p.V600")
    assert "changes the KB records for BRAF" in variant.note


def test_compound_variant_parts_are_anded(civic_ws, civic):
    query = _query(civic_ws, civic, "BRAF", "V600E/K and AMPLIFICATION")
    assert query.text.count(" AND ") == 2
    assert '("V600E"[tiab] OR "V600K"[tiab] OR "Val600Glu"[tiab]' in query.text


def test_max_forms_caps_each_entity_and_says_so(civic_ws, civic):
    query = _query(civic_ws, civic, "KRAS", "G12/G13", max_forms=3)
    assert query.slots[1].forms == ("G12", "G13", "Gly12")
    assert "left out (max_forms=3)" in query.slots[1].note


def test_structure_on_many_real_civic_relations(civic_ws):
    partials = Relations(civic_ws).partial("PO")
    assert len(partials) > 900
    for partial in partials[::8]:  # 115 relations of every kind
        query = partial_pubmed_query(civic_ws, partial)
        assert_well_formed(query)
        assert [s.slot for s in query.slots] == ["gene", "variant"]


def test_relation_by_query_key(civic_ws, civic):
    partial = civic[("EGFR", "L858R")]
    assert relation_pubmed_query(civic_ws, "PO", partial.query_key) == \
        partial_pubmed_query(civic_ws, partial)
    with pytest.raises(CurationError, match="No PO relation has the query key"):
        relation_pubmed_query(civic_ws, "PO", "gene=gene:0|variant=variant:none")


def test_therapy_combination_is_anded(civic_ws):
    query = build_pubmed_query(civic_ws, "chemical_gene", {"chemical": "Dabrafenib,Trametinib"})
    assert query.text == '"Dabrafenib"[tiab] AND "Trametinib"[tiab]'
    assert "each drug ANDed" in query.slots[0].note


@pytest.mark.parametrize(("slots", "message"), [
    ({"gene": "BRAF", "treatment": "Vemurafenib"}, "answer of schema PO"),
    ({"gene": "BRAF", "mutation": "V600E"}, "has no slot 'mutation'"),
    ({"gene": "  ", "variant": ""}, "Nothing to search for"),
    ({"variant": "EXPRESSION"}, "Nothing to search for: variant: 'EXPRESSION' left out"),
])
def test_bad_input_gets_a_clear_error(civic_ws, slots, message):
    with pytest.raises(CurationError, match=message):
        build_pubmed_query(civic_ws, "PO", slots)


def test_unknown_schema_and_max_forms(civic_ws):
    with pytest.raises(CurationError, match="schema"):
        build_pubmed_query(civic_ws, "NOPE", {"gene": "BRAF"})
    with pytest.raises(CurationError, match="max_forms is 0"):
        build_pubmed_query(civic_ws, "PO", {"gene": "BRAF"}, max_forms=0)


# -- workspace synonyms: a curator's cDNA form, a disease's MeSH entry terms -----------------


def test_stored_variant_synonym_adds_the_cdna_forms(tmp_workspace, fixtures_dir):
    import_file(tmp_workspace, "kb", "civic", fixtures_dir / "civic_v1_sample.tsv",
                progress=False)
    before = build_pubmed_query(tmp_workspace, "PO", {"gene": "BRAF", "variant": "V600E"})
    assert before.text == BRAF_V600E
    Entities(tmp_workspace).add_curator_synonym("variant:v600e", "c.1799T>A", "curator")
    after = build_pubmed_query(tmp_workspace, "PO", {"gene": "BRAF", "variant": "V600E"})
    assert after.slots[1].forms == ("V600E", "Val600Glu", "p.V600E", "p.Val600Glu", "c.1799T>A",
                                    "1799T>A")


def test_disease_with_entry_terms(tmp_workspace):
    Entities(tmp_workspace).add_synonyms(Entity("Melanoma", "disease", "D008545"),
                                         ["Melanomas", "Malignant Melanoma"], "mesh")
    query = build_pubmed_query(tmp_workspace, "disease_gene", {"disease": "melanoma"})
    assert query.text == ('("Melanoma"[tiab] OR "Malignant Melanoma"[tiab] OR '
                          '"Melanomas"[tiab])')


# -- OncoKB, UniProt, generic TSV ------------------------------------------------------------


def test_oncokb_relations(data_dir, tmp_path_factory):
    ws = _workspace(tmp_path_factory, "oncokb",
                    ("oncokb", data_dir / "oncokb/allActionableVariants_2019.txt.gz", {}))
    try:
        partials = {(p.query["gene"][0].text, p.query["variant"][0].text): p
                    for p in Relations(ws).partial("PO")}
        assert _query(ws, partials, "BRAF", "V600E").text == BRAF_V600E
        fusion = _query(ws, partials, "ABL1", "BCR-ABL1 Fusion")
        assert fusion.text == '("BCR-ABL1"[tiab] OR "BCR/ABL1"[tiab] OR "BCR ABL1"[tiab])'
        assert "'Fusion' left out beside the specific change" in fusion.slots[1].note
        assert _query(ws, partials, "ALK", "Fusions").slots[1].forms[:3] == \
            ("fusion", "fusions", "rearrangement")
        assert _query(ws, partials, "PIK3CA", "Oncogenic Mutations").slots[1].forms == \
            ("mutation", "mutations", "mutated", "mutant")
        for partial in partials.values():
            assert_well_formed(partial_pubmed_query(ws, partial))
    finally:
        ws.close()


def test_uniprot_ptm_relations(data_dir, tmp_path_factory):
    ws = _workspace(tmp_path_factory, "uniprot",
                    ("uniprot", data_dir / "uniprot_sample/swissprot_entries_sample.dat.gz", {}))
    try:
        partials = {(p.query["substrate"][0].text, p.query["residue"][0].text): p
                    for p in Relations(ws).partial("PTM")}
        query = partial_pubmed_query(ws, partials[("PRKN", "S65")])
        assert_well_formed(query)
        assert query.text == (
            '("PRKN"[tiab] OR "PARK2"[tiab] OR "Parkin"[tiab] OR '
            '"E3 ubiquitin-protein ligase parkin"[tiab] OR '
            '"Parkin RBR E3 ubiquitin-protein ligase"[tiab] OR '
            '"Parkinson disease protein 2"[tiab] OR "Parkinson juvenile disease protein 2"[tiab])'
            ' AND ("phosphorylation"[tiab] OR "phosphorylated"[tiab]) AND ("S65"[tiab] OR '
            '"Ser65"[tiab] OR "Ser-65"[tiab] OR "Ser 65"[tiab] OR "serine 65"[tiab])')
        assert "PRKN_HUMAN" not in query.text  # entry names are no paper's words
        fgfr1 = partial_pubmed_query(ws, partials[("FGFR1", "Y653")]).slots[0]
        assert len(fgfr1.forms) == 12 and fgfr1.forms[:2] == ("FGFR1", "FGFR-1")
        assert "max_forms=12" in fgfr1.note
        typed = build_pubmed_query(ws, "PTM", {"substrate": "Parkin", "ptm": "ubiquitination"})
        assert typed.slots[1].forms == ("ubiquitination", "ubiquitinated", "ubiquitylation",
                                        "ubiquitylated")
        for partial in partials.values():
            assert_well_formed(partial_pubmed_query(ws, partial))
    finally:
        ws.close()


def test_generic_tsv_relations(fixtures_dir, tmp_path_factory):
    ws = _workspace(tmp_path_factory, "generic",
                    ("tsv", fixtures_dir / "generic_sample.tsv",
                     {"mapping": str(fixtures_dir / "mapping_sample.toml")}),
                    schema=fixtures_dir / "drug_target_schema.toml")
    try:
        partials = {p.query["drug"][0].text: p for p in Relations(ws).partial("drug_target")}
        query = partial_pubmed_query(ws, partials["Lapatinib"])
        assert_well_formed(query)
        assert query.text == '("Lapatinib"[tiab] OR "GW572016"[tiab] OR "Tykerb"[tiab])'
        combination = build_pubmed_query(ws, "drug_target", {"drug": "Lapatinib + Imatinib"})
        assert_well_formed(combination)
        assert combination.text == (
            '("Lapatinib"[tiab] OR "GW572016"[tiab] OR "Tykerb"[tiab]) AND '
            '("Imatinib"[tiab] OR "STI571"[tiab] OR "Gleevec"[tiab])')
        assert combination.slots[0].clause == f"({combination.text})"
    finally:
        ws.close()


# -- the pure parts ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("V600E", ("V600E", "Val600Glu", "p.V600E", "p.Val600Glu")),
    ("W802*", ("W802X", "Trp802Ter", "p.W802X", "p.Trp802Ter")),
    ("Y772_A775DUP", ("Y772_A775dup", "Tyr772_Ala775dup", "p.Y772_A775dup",
                      "p.Tyr772_Ala775dup")),
    ("T1151INST", ("T1151insT", "Thr1151insThr", "p.T1151insT", "p.Thr1151insThr")),
])
def test_protein_notations(text, expected):
    assert protein_forms(text)[0] == expected


@pytest.mark.parametrize(("text", "gene", "groups"), [
    ("D835H/Y", "FLT3", [("D835H", "D835Y", "Asp835His", "Asp835Tyr", "p.D835H", "p.D835Y",
                          "p.Asp835His", "p.Asp835Tyr")]),
    ("R200W (c.598C>T)", "", [("R200W", "Arg200Trp", "p.R200W", "p.Arg200Trp", "c.598C>T",
                               "598C>T")]),
    ("EML4-ALK E6;A20", "ALK", [("EML4-ALK", "EML4/ALK", "EML4 ALK")]),
    ("COPY-NEUTRAL LOSS OF HETEROZYGOSITY", "HLA-C", [("LOH", "loss of heterozygosity")]),
    ("p16 EXPRESSION", "CDKN2A", [("p16 EXPRESSION",)]),
])
def test_variant_expansion(text, gene, groups):
    assert list(expand_variant(text, gene, (gene,) if gene else ()).groups) == groups


def test_fusion_partners_need_two_gene_like_parts():
    assert fusion_partners("BCR::ABL1") == ("BCR", "ABL1")
    assert fusion_partners("C1156Y-L1198F") is None
    assert fusion_partners("Wild-Type") is None


def test_forms_are_safe_for_e_utilities():
    assert forms.clean_form('UGT1A1*28') == "UGT1A1 28"
    assert forms.clean_form('a "b" [c]') == "a b c"
    assert forms.dedupe(["Trastuzumab emtansine (T-DM1)", "T-dm1",
                         "Ca(2+)-dependent scramblase"]) == ["Trastuzumab emtansine", "T-DM1"]
    assert forms.or_clause(["BRAF"]) == '"BRAF"[tiab]'
    assert forms.rank_synonyms("BRAF", ["BRAF_HUMAN", "Serine/threonine-protein kinase B-raf",
                                        "BRAF1", "Proto-oncogene B-Raf", "braf"]) == \
        ["BRAF1", "Proto-oncogene B-Raf"]
