"""The Curate and Review pages' highlight tooltips (AppTest, no browser): the entity's name and
its NCBI Gene link, and for CIViC's V600E (no external id) the relation's CIViC evidence item;
never the internal "gene: 673 (exact, 1.00)" (issue 36 item 10)."""

from __future__ import annotations

import re

import pytest
from app_helpers import APP, add_users, build_app_workspace, sign_in
from streamlit.testing.v1 import AppTest

from curation.store.relations import Relations
from curation.store.workspace import Workspace

QUERY_KEY = "gene=gene:673|variant=variant:v600e"
NCBI_BRAF = ('<a href="https://www.ncbi.nlm.nih.gov/gene/673" target="_blank" '
             'rel="noopener noreferrer">NCBI Gene 673</a>')
CIVIC_1425 = ('<a href="https://civicdb.org/evidence/1425/summary" target="_blank" '
              'rel="noopener noreferrer">CIViC EID1425</a>')


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def tip_of(card: str, slot: str) -> str:
    """The tooltip after the first mark of ``slot`` in a card's HTML."""
    start = card.index(f'data-slot="{slot}"')
    tip = card.index('<span class="kb-tip" role="tooltip">', start)
    return card[tip:card.index('</span></span></span>', tip)]


def test_the_store_reads_the_records_of_a_relation(ws_root):
    with Workspace.open(ws_root) as ws:
        rows = Relations(ws).record_entities("PO", QUERY_KEY)
        assert Relations(ws).record_entities("PO", "no such key") == []
    assert {(source, record) for source, record, _ in rows} == {("civic", "EID1425")}
    assert {key for _, _, key in rows} == {"gene:673", "variant:v600e", "drug:dabrafenib",
                                           "drug:trametinib"}


def test_curate_cards_show_names_and_database_and_kb_record_links(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert not at.exception and not at.error
    (card,) = [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')
               and ">PMID 25265492</a>" in m.value]
    assert "gene: 673" not in card and "(exact, 1.00)" not in card and " title=" not in card
    gene = tip_of(card, "gene")
    assert '<b class="kb-tip-name">BRAF</b>' in gene and NCBI_BRAF in gene
    variant = tip_of(card, "variant")
    assert '<b class="kb-tip-name">V600E</b>' in variant and CIVIC_1425 in variant
    drug = tip_of(card, "treatment")
    assert CIVIC_1425 in drug  # dabrafenib / trametinib fill EID1425's treatment slot
    # every mark of the abstract still holds only its text, inside a focusable entity span;
    # the evidence sentences under it keep plain marks (the same entities, just above)
    abstract, evidence = card.split('<div class="kb-evidence', 1)
    marks = re.findall(r'<span class="kb-ent"(?: tabindex="0")?><mark [^>]*>[^<]*</mark>',
                       abstract)
    assert len(marks) == abstract.count('<mark class="kb-mark') == 9
    # one Tab stop per entity (its first mark), not one per mention
    entities = set(re.findall(r'<mark [^>]*data-entity="([^"]+)"', abstract))
    assert abstract.count('tabindex="0"') == len(entities) < 9
    assert "<mark " in evidence and "kb-tip" not in evidence
