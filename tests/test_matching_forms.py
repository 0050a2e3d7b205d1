"""Issue 29 item 1: gene symbols in the spellings papers use (case and hyphen forms), variant marks
without their parentheses, abbreviation guards, and the symbol-only match-bench (BioC JSON too).

Each case is a real spelling from BioRED Dev or BC6PM (the miss or false positive it fixes).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from curation.matching.bench import kb_symbol, run_match_bench, run_symbol_bench, symbol_key
from curation.matching.bench_corpora import read_bench_docs
from curation.matching.matcher import EntityMatcher
from curation.matching.variants import scan_variants
from kb_sources.errors import InputFormatError
from kb_sources.types import Entity


@pytest.fixture(scope="module")
def matcher() -> EntityMatcher:
    return EntityMatcher()


def found(matcher: EntityMatcher, entity: Entity | str, text: str) -> list[str]:
    if isinstance(entity, str):
        entity = Entity(entity, "gene")
    return [s.text for s in matcher.find_spans({"gene": [entity]}, text)]


# -- gene symbols ------------------------------------------------------------------------------
def test_akt1_in_the_issue_sentence(matcher: EntityMatcher) -> None:
    spans = matcher.find_spans({"substrate": [Entity("AKT1", "gene")]},
                               "the phosphorylation level of Akt1 (S473) was reduced")
    assert [(s.text, s.slot) for s in spans] == [("Akt1", "substrate")]


@pytest.mark.parametrize(("symbol", "text", "expected"), [
    ("CASR", "CaSR and CASR; casr is left alone", ["CaSR", "CASR"]),
    ("MTOR", "mTOR inhibitors and MTOR", ["mTOR", "MTOR"]),
    ("PPARA", "PPARa agonists", ["PPARa"]),
    ("EXBD", "TonB and ExbD", ["ExbD"]),
    ("CAM", "Ca(2+)/CaM binding", ["CaM"]),
    ("CHAT", "ChAT neurons; a chat and a Chat", ["ChAT"]),  # ordinary word, mixed case is not
])
def test_mixed_case_spellings_of_a_symbol(matcher: EntityMatcher, symbol: str, text: str,
                                          expected: list[str]) -> None:
    assert found(matcher, symbol, text) == expected


def test_erbb2_spellings_and_her2_from_its_synonym(matcher: EntityMatcher) -> None:
    erbb2 = Entity("ERBB2", "gene", "2064", ("HER2",))
    text = "ErbB2, erbB-2, c-erbB-2, ERBB2, HER-2, Her2 and HER2"
    assert found(matcher, erbb2, text) == ["ErbB2", "erbB-2", "c-erbB-2", "ERBB2", "HER-2",
                                           "Her2", "HER2"]
    assert found(matcher, "ERBB2", "HER2 amplification") == []  # no synonym, no HER2


@pytest.mark.parametrize(("symbol", "text", "expected"), [
    ("KRAS", "K-ras, K-Ras and KRAS", ["K-ras", "K-Ras", "KRAS"]),
    ("NRAS", "N-ras and N-RAS", ["N-ras", "N-RAS"]),
    ("HNS", "the H-NS protein", ["H-NS"]),
    ("BRAF", "B-raf and B-Raf", ["B-raf", "B-Raf"]),
    ("KIT", "c-Kit, c-KIT, the kit and the Kit", ["c-Kit", "c-KIT"]),
    ("MYC", "c-Myc, Myc and c-myc", ["c-Myc", "Myc", "c-myc"]),
    ("HER2", "HER-2 and Her-2", ["HER-2", "Her-2"]),
])
def test_hyphenated_forms(matcher: EntityMatcher, symbol: str, text: str,
                          expected: list[str]) -> None:
    assert found(matcher, symbol, text) == expected


@pytest.mark.parametrize(("symbol", "text", "expected"), [
    ("BTK", "Bruton's tyrosine kinase (Btk) and BTK", ["Bruton's tyrosine kinase", "Btk", "BTK"]),
    ("SRC", "Src family kinases", ["Src"]),
    ("ASP", "substitution of Ser(15) to Asp; ASP", ["ASP"]),  # an amino acid, not the gene
    ("COX", "Multivariate Cox models; COX", ["COX"]),
    ("TEL", "Tel-Aviv, Israel; TEL", ["TEL"]),
])
def test_three_letter_symbols_capitalised_unless_guarded(matcher: EntityMatcher, symbol: str,
                                                         text: str, expected: list[str]) -> None:
    assert found(matcher, symbol, text) == expected


@pytest.mark.parametrize(("symbol", "text", "expected"), [
    ("FGFR", "in MMP-9, FGFR-4 and FGF-3; FGFRs", ["FGFRs"]),
    ("PAR", "dependent on PAR-1 activation; PAR-1-mediated; PAR", ["PAR"]),
    ("MDMX", "the MDMX-14-3-3 interaction", ["MDMX"]),  # 14-3-3 is the partner
])
def test_a_symbol_is_not_the_start_of_a_numbered_one(matcher: EntityMatcher, symbol: str,
                                                     text: str, expected: list[str]) -> None:
    assert found(matcher, symbol, text) == expected


# -- variants and abbreviations ----------------------------------------------------------------
@pytest.mark.parametrize(("text", "mention"), [
    ("BRAF (V600E) was", "V600E"),
    ("BRAF(V600E)", "V600E"),
    ("BRAF (Val600Glu)", "Val600Glu"),
    ("(c.1799T>A)", "c.1799T>A"),
    ("(F508del)", "F508del"),
    ("BRAF p.(Val600Glu)", "p.(Val600Glu)"),  # HGVS keeps its own parentheses
    ("(p.(Val600Glu))", "p.(Val600Glu)"),
])
def test_variant_mentions_without_surrounding_parentheses(text: str, mention: str) -> None:
    assert [text[m.start:m.end] for m in scan_variants(text)] == [mention]


def test_variant_marks_in_the_matcher(matcher: EntityMatcher) -> None:
    text = ("BRAF (V600E) and p.(Val600Glu) and (p.V600E) and BRAF(V600E) and (Val600Glu) "
            "in melanoma")
    spans = matcher.find_spans({"variant": [Entity("V600E", "variant")]}, text)
    assert [s.text for s in spans] == ["V600E", "p.(Val600Glu)", "p.V600E", "V600E",
                                       "Val600Glu"]


def test_a_parenthesised_list_defines_no_abbreviation(matcher: EntityMatcher) -> None:
    text = ("Binding partners of eIF4A (eIF4G, RNA, ATP) stimulate eIF4A activity. The eIF4G, "
            "RNA, ATP mix.")
    assert found(matcher, "EIF4A", text) == ["eIF4A", "eIF4A"]


# -- match-bench: symbol-only entities, BioC JSON ----------------------------------------------
def test_kb_symbol_of_an_id_from_its_mentions() -> None:
    assert kb_symbol(Counter({"B-Raf": 3, "BRAF": 2, "v-raf": 1})) == "BRAF"
    assert kb_symbol(Counter({"HER-2": 2, "HER2": 1, "ErbB2": 1})) == "HER2"
    assert kb_symbol(Counter({"c-Met": 4, "MET": 1, "hepatocyte growth factor receptor": 9})) \
        == "MET"
    assert kb_symbol(Counter({"MMPs": 3})) == "MMP"
    assert kb_symbol(Counter({"insulin": 5})) is None
    assert symbol_key("c-Met") == symbol_key("MET") == "met"


def bioc(tmp_path: Path, documents: list[dict]) -> Path:
    path = tmp_path / "bc6pm_like.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"source": "PubMed", "documents": documents}, fh)
    return path


def test_bioc_documents_and_the_symbol_bench(tmp_path: Path) -> None:
    title = "Akt1 binds B-Raf."
    abstract = "AKT1 and Akt1 phosphorylate BRAF; protein kinase B too."
    ann = [  # (passage, offset in the passage, text, id)
        (0, 0, "Akt1", "207"), (0, 11, "B-Raf", "673"), (1, 0, "AKT1", "207"),
        (1, 9, "Akt1", "207"), (1, 28, "BRAF", "673"), (1, 34, "protein kinase B", "207")]
    passages = [{"infons": {"type": kind}, "offset": offset, "text": text, "annotations": [
        {"text": t, "infons": {"type": "Gene", "NCBI GENE": ident},
         "locations": [{"offset": offset + o, "length": len(t)}]}
        for p, o, t, ident in ann if p == i]}
        for i, (kind, offset, text) in enumerate(
            [("title", 0, title), ("abstract", len(title) + 1, abstract)])]
    path = bioc(tmp_path, [{"id": "123", "passages": passages}])
    (doc,) = read_bench_docs(path)
    assert doc.text == f"{title} {abstract}"
    assert [(doc.text[a.start:a.end], a.ids) for a in doc.annotations][-1] == \
        ("protein kinase B", ("207",))
    result = run_symbol_bench(path)
    # AKT1 finds its 3 symbol mentions (not "protein kinase B"), BRAF finds B-Raf and BRAF
    assert (result.gold, result.gold_found, result.predicted, result.true_positive) == \
        (5, 5, 5, 5)
    assert run_match_bench(path)["gene"].recall == 1.0


def test_bioc_annotation_that_does_not_fit_is_skipped(tmp_path: Path) -> None:
    passages = [{"infons": {"type": "title"}, "offset": 0, "text": "BRAF in melanoma.",
                 "annotations": [{"text": "BRAF", "infons": {"type": "Gene", "identifier": "673"},
                                  "locations": [{"offset": 5, "length": 4}]}]}]
    (doc,) = read_bench_docs(bioc(tmp_path, [{"id": "1", "passages": passages}]))
    assert doc.annotations == ()


def test_not_a_bioc_collection(tmp_path: Path) -> None:
    bad = tmp_path / "single.json"
    bad.write_text('{"id": "1", "passages": []}', encoding="utf-8")
    with pytest.raises(InputFormatError, match="no 'documents' list"):
        read_bench_docs(bad)
    with pytest.raises(InputFormatError, match="file not found"):
        read_bench_docs(tmp_path / "missing.json")


def test_symbol_bench_on_biored_dev(data_dir: Path) -> None:
    """BioRED Dev genes searched by their upper-case symbol alone: 0.895 recall / 0.921
    precision before the mixed-case, hyphen and numbered-symbol rules."""
    result = run_symbol_bench(data_dir / "biored" / "Dev.PubTator.gz")
    assert result.gold == 727
    assert result.recall >= 0.99 and result.precision >= 0.93
