"""match-bench: span recall/precision per entity type on PubTator gold.

A hand-made fixture with exactly known figures, and the real corpora (BioRED Test, tmVar test)
with the thresholds this matcher achieves (issue targets: variants >= 0.90 / 0.90, genes and
chemicals >= 0.85 / 0.85). SETH and BC5CDR are reserved as outside checks and never read here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from curation.matching.bench import (
    MatchBenchResult,
    entity_for,
    format_table,
    match_bench_report,
    results_to_json,
    run_match_bench,
)
from kb_sources.errors import InputFormatError
from kb_sources.types import Entity


@pytest.fixture(scope="module")
def sample(fixtures_dir: Path) -> dict[str, MatchBenchResult]:
    return run_match_bench(fixtures_dir / "match_bench_sample.txt")


def test_fixture_figures_are_exact(sample: dict[str, MatchBenchResult]) -> None:
    # genes: BRAF / B-Raf / BRAF found, lower-case "braf" not predicted, CTAG2 never on STAG2
    assert sample["gene"] == MatchBenchResult(1.0, 1.0, 7, 7, 7, 7, 2)
    # variants: V600E and Val600Glu share one tmVar id
    assert sample["variant"] == MatchBenchResult(1.0, 1.0, 2, 2, 2, 2, 1)
    # chemicals: the one-letter "T" (testosterone) cannot be matched: 2 of 4 gold found
    assert sample["chemical"] == MatchBenchResult(0.5, 1.0, 4, 2, 2, 2, 2)
    # diseases: an unannotated second "melanoma" counts against precision
    assert sample["disease"].precision == pytest.approx(2 / 3)
    assert (sample["disease"].gold, sample["disease"].predicted) == (2, 3)


def test_types_filter(fixtures_dir: Path) -> None:
    results = run_match_bench(fixtures_dir / "match_bench_sample.txt", types=["Variant"])
    assert list(results) == ["variant"]


def test_held_out_entities_drop_the_documents_own_mentions(fixtures_dir: Path) -> None:
    results = run_match_bench(fixtures_dir / "match_bench_sample.txt", held_out=True)
    # CTAG2/STAG2/testosterone occur in one document only; the tmVar id still gives V600E
    assert results["variant"].recall == 1.0
    assert results["gene"].gold_found == 0


def test_json_and_table_output(sample: dict[str, MatchBenchResult]) -> None:
    data = json.loads(results_to_json(sample))
    assert data["variant"]["recall"] == 1.0 and data["chemical"]["gold"] == 4
    assert set(data["gene"]) >= {"recall", "precision", "gold", "predicted"}
    table = format_table(sample).splitlines()
    assert table[0].split() == ["type", "docs", "gold", "predicted", "fp", "recall",
                                "precision"]
    assert table[1].split() == ["chemical", "2", "4", "2", "0", "0.500", "1.000"]
    assert sample["disease"].false_positive == 1 and data["disease"]["false_positive"] == 1


def test_report_is_what_the_command_prints(fixtures_dir: Path) -> None:
    path = fixtures_dir / "match_bench_sample.txt"
    data = json.loads(match_bench_report(path, ["variant"], as_json=True))
    assert data == {"variant": {"recall": 1.0, "precision": 1.0, "gold": 2, "predicted": 2,
                                "true_positive": 2, "false_positive": 0, "gold_found": 2,
                                "documents": 1}}
    assert match_bench_report(path).splitlines()[0].startswith("type")


def test_entity_for_ranks_mentions_by_frequency() -> None:
    entity = entity_for(("gene", "673"), Counter({"B-Raf": 1, "BRAF": 3, "braf": 1}))
    assert entity == Entity("BRAF", "gene", "673", ("B-Raf", "braf"))
    assert entity_for(("variant", "rs1"), Counter()) == Entity("", "variant", "rs1")


def test_not_a_pubtator_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("just\ta\ttable\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match="bad.txt"):
        run_match_bench(bad)


# -- real corpora ------------------------------------------------------------------------------
def test_biored_test_quality(data_dir: Path) -> None:
    results = run_match_bench(data_dir / "biored" / "Test.PubTator.gz",
                              types=["gene", "variant", "chemical", "disease"])
    variant, gene, chemical = results["variant"], results["gene"], results["chemical"]
    assert variant.gold == 241 and variant.recall >= 0.99 and variant.precision >= 0.97
    assert gene.gold == 1270 and gene.recall >= 0.99 and gene.precision >= 0.89
    assert chemical.gold == 751 and chemical.recall >= 0.99 and chemical.precision >= 0.97
    assert results["disease"].recall >= 0.99 and results["disease"].precision >= 0.87


def test_tmvar_test_quality(data_dir: Path) -> None:
    (variant,) = run_match_bench(data_dir / "tmvar" / "tmVar_test.PubTator.txt.gz").values()
    assert variant.gold == 468
    assert variant.recall >= 0.96 and variant.precision >= 0.97


def test_report_with_the_symbol_row(fixtures_dir: Path) -> None:
    path = fixtures_dir / "match_bench_sample.txt"
    data = json.loads(match_bench_report(path, ["gene"], as_json=True, symbols=True))
    assert list(data) == ["gene", "gene-symbol"]
    assert data["gene-symbol"]["gold"] >= 1 and data["gene-symbol"]["recall"] == 1.0
    assert match_bench_report(path, ["gene"], symbols=True).splitlines()[2].startswith(
        "gene-symbol")
