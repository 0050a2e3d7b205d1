"""Normalisation rules, each with real examples: variants, residues, PTM types, Greek letters,
hyphens, case and inflection (curation.matching.normalize, curation.matching.variants)."""

from __future__ import annotations

import pytest

from curation.matching.normalize import (
    fold,
    is_symbol,
    parse_residue,
    ptm_pattern,
    ptm_stem,
    residue_pattern,
    surface_pattern,
    tokens,
)
from curation.matching.patterns import FormRegex
from curation.matching.variants import key_family, keys_from_id, scan_variants, variant_keys


def found(pattern, text: str) -> list[str]:
    """Texts matched by a SurfacePattern in ``text``."""
    regex = FormRegex.compile(pattern)
    return [text[s:e] for s, e in regex.finditer(text, text.lower())]


# -- protein variants -------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "V600E", "Val600Glu", "p.V600E", "p.Val600Glu", "valine 600 to glutamic acid",
    "Val-600-Glu", "p.(Val600Glu)", "VAL600GLU", "BRAF V600E", "BRAFV600E",
])
def test_protein_substitution_spellings_share_one_key(text: str) -> None:
    assert variant_keys(text) == {"p.V600E"}


@pytest.mark.parametrize(("text", "key"), [
    ("aspartic acid to histidine substitution at amino acid position 401", "p.D401H"),
    ("substitution of aspartic acid with glycine in codon 506", "p.D506G"),
    ("glutamine with lysine at residue 223", "p.Q223K"),
    ("Ser-->Cys substitution at the codon 326", "p.S326C"),
    ("leucine 269 to phenylalanine", "p.L269F"),
    ("glycine-594-valine", "p.G594V"),
    ("Gly(388)Arg", "p.G388R"),
    ("Glu 4 Lys", "p.E4K"),
    ("Pro75 Ala", "p.P75A"),
    ("p. K237N", "p.K237N"),
    ("Tyr65X", "p.Y65*"),
    ("p.Tyr65Ter", "p.Y65*"),
    ("p.Y65*", "p.Y65*"),
    ("sG145R", "p.G145R"),
])
def test_protein_substitution_forms(text: str, key: str) -> None:
    assert variant_keys(text) == {key}


@pytest.mark.parametrize(("texts", "key"), [
    (("delF508", "F508del", "ΔF508", "deltaF508", "p.Phe508del"), "p.F508del"),
    (("p.E746_A750del", "p.Glu746_Ala750del"), "p.746_750del"),
    (("R58fs", "p.Arg58fs"), "p.R58fs"),
    (("p.G204VfsX28", "p.Gly204ValfsTer28"), "p.G204fs*28"),
    (("1936delG", "c.1936delG", "1936 del G"), "n.1936del"),
    (("c.2113_2114delGG", "2113-2114delGG"), "n.2113_2114del"),
    (("c.14_15insC", "14_15insC"), "n.14_15ins"),
])
def test_deletions_insertions_frameshifts(texts: tuple[str, ...], key: str) -> None:
    for text in texts:
        assert variant_keys(text) == {key}, text


def test_frameshift_without_length_is_broader_than_with_length() -> None:
    (mention,) = scan_variants("p.G204VfsX28")
    assert "p.G204fs" in mention.broader and "p.G204" in mention.broader


@pytest.mark.parametrize(("texts", "key"), [
    (("c.1517A>G", "1517A>G", "1517 A>G", "c.1517 A > G", "1517A/G", "c.1517A-->G"),
     "n.1517A>G"),
    (("G-395A", "-395G>A", "-395 G/A"), "n.-395G>A"),
    (("c.357-3C>G",), "n.357-3C>G"),
    (("IVS3+1G>A",), "n.IVS3+1G>A"),
    (("c.*557G>A",), "n.*557G>A"),
    (("G to A substitution in nucleotide 256", "(G --> A) substitution at position 256"),
     "n.256G>A"),
    (("rs1799998", "rs 1799998", "RS1799998"), "rs1799998"),
])
def test_dna_substitutions_and_rsids(texts: tuple[str, ...], key: str) -> None:
    for text in texts:
        assert key in variant_keys(text), text


def test_one_letter_dna_change_is_also_read_as_protein_change() -> None:
    # A3243G (mitochondrial) and Ala3243Gly cannot be told apart without context.
    assert variant_keys("A3243G") == {"n.3243A>G", "p.A3243G"}


@pytest.mark.parametrize(("texts", "key"), [
    (("EML4-ALK", "EML4::ALK", "EML4/ALK", "EML4–ALK", "EML4-ALK fusion"), "fusion:EML4::ALK"),
    (("exon 19 deletion", "exon 19 deletions", "Exon-19 del", "exon19del", "del19",
      "deletion in exon 19", "in-frame deletions in exon 19"), "exon19:del"),
    (("exon 20 insertion", "exon20ins", "insertions in exon 20"), "exon20:ins"),
    (("exon 14 skipping",), "exon14:skip"),
    (("amplification", "amplified", "Amplifications", "copy number gain"), "amp"),
    (("overexpression", "over-expression", "overexpressed", "over-expressing"),
     "overexpression"),
])
def test_fusions_exon_level_and_expression_words(texts: tuple[str, ...], key: str) -> None:
    for text in texts:
        assert variant_keys(text) == {key}, text


@pytest.mark.parametrize(("text", "key"), [
    ("I843DEL", "p.I843del"), ("W288FS", "p.W288fs"), ("K159FS*16", "p.K159fs*16"),
    ("P780INS", "p.P780ins"), ("MUTATION", "mutation"), ("DELETION", "deletion"),
    ("UNDEREXPRESSION", "underexpression"),
])
def test_civic_variant_names_in_capitals(text: str, key: str) -> None:
    assert variant_keys(text) == {key}


def test_class_words_count_only_as_the_whole_text() -> None:
    assert variant_keys("TGAG deletion") == set()
    assert variant_keys("ERBB2 amplification") == set()


def test_a_protein_change_next_to_a_gene_is_no_fusion() -> None:
    assert variant_keys("EGFR-L858R") == {"p.L858R"}


def test_bare_residue_inside_a_change_is_dropped() -> None:
    assert [(m.start, m.end) for m in scan_variants("Pro75 Ala")] == [(0, 9)]


def test_unpaired_parenthesis_is_not_part_of_the_mention() -> None:
    text = "BRAF (p.V600E) was"
    (mention,) = scan_variants(text)
    assert text[mention.start:mention.end] == "p.V600E"


@pytest.mark.parametrize(("identifier", "keys"), [
    ("p|SUB|V|600|E", {"p.V600E"}),
    ("p|SUB|E|153|X", {"p.E153*"}),
    ("c|SUB|A|1517|G", {"n.1517A>G"}),
    ("|SUB|C|677|T", {"n.677C>T"}),
    ("c|SUB|G|IVS3+1|A", {"n.IVS3+1G>A"}),
    ("c|DEL|1936|G", {"n.1936del"}),
    ("p|DEL|508|F", {"p.F508del"}),
    ("p|DEL|204_247|", {"p.204_247del"}),
    ("p|FS|Y|329||", {"p.Y329fs"}),
    ("rs74805019", {"rs74805019"}),
    ("RS#:113488022", {"rs113488022"}),
    ("D003924", set()),
])
def test_keys_from_tmvar_ids(identifier: str, keys: set[str]) -> None:
    assert keys_from_id(identifier) == keys


def test_key_families() -> None:
    assert [key_family(k) for k in ("p.V600E", "n.1517A>G", "rs1", "exon19:del",
                                    "fusion:EML4::ALK", "amp")] == \
        ["protein", "dna", "rs", "exon", "fusion", "class"]


# -- residues ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["S473", "Ser473", "Ser-473", "Ser 473", "serine 473",
                                  "Serine-473", "Ser(473)", "serine residue 473"])
def test_residue_spellings_parse_alike(text: str) -> None:
    assert parse_residue(text) == ("S", 473)


def test_lower_case_one_letter_is_not_a_residue() -> None:
    assert parse_residue("s473") is None
    assert parse_residue("phosphorylation") is None


def test_residue_pattern_finds_every_spelling() -> None:
    text = ("Akt S473, Ser473, Ser-473, serine 473, Ser(473) and pS473; "
            "not S4731 nor AS473 nor Thr473.")
    assert found(residue_pattern("S", 473), text) == [
        "S473", "Ser473", "Ser-473", "serine 473", "Ser(473)", "pS473"]


# -- PTM types ---------------------------------------------------------------------------------
def test_phosphorylation_forms() -> None:
    text = ("Phosphorylation, phosphorylated Akt, it phosphorylates, hyperphosphorylation, "
            "autophosphorylation, phospho-Akt, phosphoserine, phosphoproteins; "
            "not phosphatase, phosphate, phospholipid or dephosphorylation.")
    assert found(ptm_pattern("phosphorylation"), text) == [
        "Phosphorylation", "phosphorylated", "phosphorylates", "hyperphosphorylation",
        "autophosphorylation", "phospho-", "phospho", "phospho"]


@pytest.mark.parametrize(("ptm", "text", "expected"), [
    ("acetylation", "acetylated H3, N6-acetyllysine, acetyl-CoA, deacetylation",
     ["acetylated", "N6-acetyl"]),
    ("methylation", "trimethylation, methylated DNA, dimethylarginine, demethylation",
     ["trimethylation", "methylated", "dimethyl"]),
    ("ubiquitination", "ubiquitylation, polyubiquitinated, ubiquitin ligase",
     ["ubiquitylation", "polyubiquitinated"]),
    ("sumoylation", "SUMOylated PML, sumoylation, SUMO-1", ["SUMOylated", "sumoylation"]),
    ("S-nitrosylation", "S-nitrosylated, nitrosylation", ["S-nitrosylated", "nitrosylation"]),
    ("ADP-ribosylation", "ADP ribosylated PARP", ["ADP ribosylated"]),
])
def test_other_ptm_types(ptm: str, text: str, expected: list[str]) -> None:
    assert found(ptm_pattern(ptm), text) == expected


def test_ptm_stems_from_uniprot_names() -> None:
    assert ptm_stem("Phosphoserine") == "phosphoryl"
    assert ptm_stem("N6-acetyllysine") == "acetyl"
    assert ptm_stem("phosphorylated") == "phosphoryl"
    assert ptm_pattern("pyroglutamate formation") is None


# -- Greek letters, hyphens, case, inflection ------------------------------------------------
def test_greek_letters_fold_to_names() -> None:
    assert fold("TNF-α") == fold("TNF alpha") == fold("TNFalpha") == "tnfalpha"
    assert tokens("TNFα") == ["TNF", "alpha"]
    assert tokens("PKCdelta") == ["PKC", "delta"]


def test_greek_and_hyphen_spellings_match() -> None:
    text = "TNF-alpha, TNFα, TNF alpha, TNF-α and TNFalpha; not TNF-beta."
    assert found(surface_pattern("TNF-α"), text) == [
        "TNF-alpha", "TNFα", "TNF alpha", "TNF-α", "TNFalpha"]
    assert found(surface_pattern("Delta32"), "CCR5 Δ32 and delta32") == ["Δ32", "delta32"]


def test_hyphens_and_spaces_are_optional_between_tokens() -> None:
    assert found(surface_pattern("HNF-6"), "HNF6, HNF 6, HNF-6, HNF–6; not HNF-60") == [
        "HNF6", "HNF 6", "HNF-6", "HNF–6"]
    assert found(surface_pattern("non-insulin-dependent diabetes"),
                 "non insulin dependent diabetes") == ["non insulin dependent diabetes"]


def test_symbols_keep_their_case_words_do_not() -> None:
    assert is_symbol("CAT") and is_symbol("p53") and is_symbol("HNF-6")
    assert not is_symbol("insulin") and not is_symbol("Langerin") and not is_symbol("c-myc")
    assert found(surface_pattern("CAT"), "The cat and CAT activity; CATs.") == ["CAT", "CATs"]
    assert found(surface_pattern("SET"), "a set of SET proteins") == ["SET"]
    assert found(surface_pattern("BRAF"), "BRAF, Braf, braf") == ["BRAF", "Braf"]
    assert found(surface_pattern("insulin"), "Insulin and INSULIN") == ["Insulin", "INSULIN"]


def test_simple_inflection() -> None:
    assert found(surface_pattern("kinase"), "kinases and kinase") == ["kinases", "kinase"]
    assert found(surface_pattern("therapy"), "therapies, Therapy") == ["therapies", "Therapy"]
    assert found(surface_pattern("ERK"), "ERKs and ERK") == ["ERKs", "ERK"]


def test_no_match_inside_another_word() -> None:
    assert found(surface_pattern("CTAG2"), "STAG2 and xCTAG2 and CTAG20") == []
    assert found(surface_pattern("insulin"), "proinsulin and insulinoma") == []


def test_too_short_forms_give_no_pattern() -> None:
    assert surface_pattern("T") is None
    assert surface_pattern("-") is None


def test_anchor_is_a_substring_of_every_match() -> None:
    for form, text in (("therapy", "therapies"), ("TNF-alpha", "TNFα"), ("HNF-6", "HNF6")):
        pattern = surface_pattern(form)
        assert pattern is not None and pattern.anchor in text.lower()


def test_gene_symbols_in_the_case_forms_papers_use():
    """Issue 29 item 1: Akt1 / akt1 for AKT1, B-Raf for BRAF, c-Met for MET; ordinary words
    stay guarded."""
    from curation.matching.matcher import EntityMatcher
    from kb_sources.types import Entity

    m = EntityMatcher()

    def found(symbol: str, text: str) -> list[str]:
        spans = m.find_spans({"gene": [Entity(symbol, "gene")]}, text)
        return [text[s.start:s.end] for s in spans]

    assert found("AKT1", "the level of Akt1 (S473); akt1 and AKT1") == ["Akt1", "akt1", "AKT1"]
    assert found("BRAF", "B-Raf, B-RAF, BRaf, Braf and BRAF; not braf") == [
        "B-Raf", "B-RAF", "BRaf", "Braf", "BRAF"]
    assert found("MET", "Met in 1990 we met c-Met, c-MET and MET") == ["c-Met", "c-MET", "MET"]
    assert found("MYC", "c-myc and c-Myc bind MYC") == ["c-myc", "c-Myc", "MYC"]
    assert found("KRAS", "K-Ras and KRAS") == ["K-Ras", "KRAS"]
    assert found("SET", "a set of SET proteins; Set") == ["SET"]
    assert found("TP53", "Tp53 and tp53 knockout; TP53") == ["Tp53", "tp53", "TP53"]
    assert found("AKT1", "makt1 and AKT10") == []  # never inside another word or symbol
