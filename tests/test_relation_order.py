"""Which relation a list offers first (issue 36 item 11): variant_disease does not open on a
position-less variant ("G-to-A -> ?", PubTator's ``c|SUB|G||A``) that merges unrelated genes.

A hand-made PubTator corpus: "G-to-A" in three abstracts about three genes (so the most cited
variant_disease relation), PTPN22 R620W in one."""

from __future__ import annotations

import pytest

from curation.search.indexing import get_index
from curation.search.relation_table import (
    curation_order,
    positionless_variant,
    vague_relation,
)
from curation.search.worklist import Priority, worklist
from curation.store.importer import import_file
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.types import Entity

DOCS = (
    ("99400001", "A G-to-A transition in MYH7 causes cardiomyopathy.", "cardiomyopathy",
     "D009202", "G-to-A", "c|SUB|G||A"),
    ("99400002", "A G-to-A change in CFTR in cystic fibrosis.", "cystic fibrosis", "D003550",
     "G-to-A", "c|SUB|G||A"),
    ("99400003", "A G-to-A substitution in HBB in anemia.", "anemia", "D000740", "G-to-A",
     "c|SUB|G||A"),
    ("99400004", "PTPN22 R620W predisposes to type 1 diabetes.", "type 1 diabetes", "D003922",
     "R620W", "p|SUB|R|620|W"),
)


def pubtator() -> str:
    blocks = []
    for pmid, title, disease, mesh, variant, tmvar in DOCS:
        v, d = title.index(variant), title.index(disease)
        blocks.append("\n".join([
            f"{pmid}|t|{title}", f"{pmid}|a|",
            f"{pmid}\t{v}\t{v + len(variant)}\t{variant}\tSequenceVariant\t{tmvar}",
            f"{pmid}\t{d}\t{d + len(disease)}\t{disease}\tDiseaseOrPhenotypicFeature\t{mesh}",
            f"{pmid}\tAssociation\t{tmvar}\t{mesh}"]))
    return "\n\n".join(blocks) + "\n\n"


@pytest.fixture
def ws(tmp_path):
    path = tmp_path / "variants.pubtator"
    path.write_text(pubtator(), encoding="utf-8")
    with Workspace.init(tmp_path / "ws") as w:
        import_file(w, "kb", "pubtator", path, progress=False, source="hand")
        yield w


def first_variant(rows) -> str:
    return rows[0].query["variant"][0].text


@pytest.mark.parametrize(("entity", "vague"), [
    (Entity("G-to-A", "variant", "c|SUB|G||A"), True),
    (Entity("TGAG deletion", "variant", "c|DEL||TGAG"), True),
    (Entity("deletion", "variant"), True),
    (Entity("R620W", "variant", "p|SUB|R|620|W"), False),
    (Entity("c.1858C>T", "variant", "c|SUB|C|1858|T"), False),
    (Entity("Delta32", "variant"), False),
    (Entity("G/A", "variant", "rs1801133"), False),
    (Entity("BRAF", "gene"), False),
])
def test_positionless_variants(entity, vague):
    assert positionless_variant(entity) is vague


def test_the_relation_list_does_not_open_on_a_positionless_variant(ws):
    rows = Relations(ws).partial("variant_disease")
    assert first_variant(rows) == "G-to-A"  # the store's order: most cited first
    assert len(rows[0].answers) == 3 and vague_relation(rows[0])
    ordered = curation_order(rows)
    assert [first_variant([p]) for p in ordered] == ["R620W", "G-to-A"]
    assert not vague_relation(ordered[0])


@pytest.mark.parametrize("priority", list(Priority))
def test_the_worklist_starts_on_a_positioned_variant(ws, priority):
    from curation.matching.matcher import EntityMatcher

    bm25 = get_index(ws, "bm25", progress=False)
    rows = worklist(ws, "variant_disease", bm25, k=2, progress=False, priority=priority,
                    matcher=EntityMatcher())
    assert [r.label.split(" → ")[0] for r in rows] == ["R620W", "G-to-A"]


def test_the_curate_page_opens_on_a_positioned_variant(ws, monkeypatch):
    from app_helpers import APP, add_users, sign_in
    from streamlit.testing.v1 import AppTest

    get_index(ws, "bm25", progress=False)
    add_users(ws.root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(ws.root))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    picker = at.selectbox(key="relation_pick_variant_disease")
    (r620w,) = [p for p in Relations(ws).partial("variant_disease")
                if p.query["variant"][0].text == "R620W"]
    assert picker.value == r620w.query_key
