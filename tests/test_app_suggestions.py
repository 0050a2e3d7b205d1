"""Answer suggestions a curator can trust (issue 29, item 2; item 6's export button), AppTest.

The Curate page's suggestions table flags NEW only specific answers named in a sentence with
the query, marks classes and generic therapies, shows the supporting sentences escaped and
PMIDs in full; the Review page keeps its export after the last new suggestion is accepted.
"""

from __future__ import annotations

import json
import re

import pytest
from app_helpers import APP, FIXTURES, add_users, build_app_workspace, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.access.users import Role, User
from curation.search.indexing import get_index
from curation.search.suggestions import add_suggestion, list_suggestions, moderate_suggestion
from curation.store.importer import import_file
from curation.store.relations import Relations
from curation.store.workspace import Workspace

PMID = "90300001"
SENTENCE = ("Patients with BRAF V600E melanoma received a BRAF inhibitor or nilotinib "
            "[x](javascript:alert(1)) <b>after</b> chemotherapy failed.")
DOC = {"pmid": PMID, "title": "BRAF V600E melanoma after chemotherapy (hand-made).",
       "abstract": f"{SENTENCE} Gefitinib was given to other patients.", "year": 2021}
#: CIViC records (hand-made) whose treatments are a class and a generic therapy, as CIViC has.
CIVIC_ROWS = (("NRAS", "4893", "Q61K", "BRAF Inhibitor", "90300011", "101"),
              ("KRAS", "3845", "G12C", "Chemotherapy", "90300012", "102"))


def civic_tsv(path) -> None:
    """The sample's header and the hand-made :data:`CIVIC_ROWS`."""
    lines = (FIXTURES / "civic_v1_sample.tsv").read_text(encoding="utf-8").splitlines()
    columns = lines[0].split("\t")
    out = [lines[0]]
    for gene, entrez, variant, drug, pmid, eid in CIVIC_ROWS:
        row = dict.fromkeys(columns, "")
        row.update(gene=gene, entrez_id=entrez, variant=variant, disease="Melanoma",
                   drugs=drug, evidence_type="Predictive", evidence_direction="Supports",
                   evidence_level="C", clinical_significance="Sensitivity/Response",
                   evidence_statement="hand-made", citation_id=pmid, source_type="PubMed",
                   rating="3", evidence_status="accepted", evidence_id=eid, variant_id=eid,
                   reference_build="GRCh37", variant_origin="Somatic")
        out.append("\t".join(row[c] for c in columns))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    (tmp_path / "docs.jsonl").write_text(json.dumps(DOC) + "\n", encoding="utf-8")
    civic_tsv(tmp_path / "civic.tsv")
    with Workspace.open(root) as ws:
        import_file(ws, "docs", "jsonl", tmp_path / "docs.jsonl", progress=False)
        import_file(ws, "kb", "civic", tmp_path / "civic.tsv", progress=False)
        get_index(ws, "bm25", progress=False)
    add_users(root, alice="curator", cur="curator", eve="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def braf_page() -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF V600E").run()
    assert not at.exception and not at.error
    return at


def candidates_table(at: AppTest):
    """The suggestions table (a dataframe's key reaches AppTest only for selectable ones)."""
    (table,) = [d for d in at.dataframe if "flag" in d.value.columns]
    return table


def test_classes_are_marked_never_new_and_only_sentence_candidates_are_suggested(ws_root):
    """ "BRAF Inhibitor" and "Chemotherapy" were flagged NEW treatments (failed before: the
    "new" column said NEW for both; imatinib, named away from the query, was NEW too)."""
    at = braf_page()
    frame = candidates_table(at).value.set_index("candidate")
    assert frame.loc["BRAF Inhibitor", "flag"] == "class"
    assert frame.loc["Chemotherapy", "flag"] == "generic"  # a generic therapy
    assert frame.loc["Nilotinib", "flag"] == "NEW"
    assert frame.loc["Nilotinib", "PMIDs"] == PMID and frame.loc["Nilotinib", "sentences"] == 1
    assert "Gefitinib" not in frame.index  # mentioned with no query entity: not suggested
    mention = next(c.value for c in at.caption if "Also mentioned" in c.value)
    assert "Gefitinib (" in shown(mention)
    # imatinib is named with BRAF V600E in another abstract, not in this one
    assert frame.loc["Imatinib", ["flag", "PMIDs"]].tolist() == ["NEW", "90100001"]
    assert sorted(frame.index[frame["flag"] == "NEW"]) == ["Imatinib", "Nilotinib"]


def test_pmids_are_shown_in_full_and_link_to_pubmed(ws_root):
    """The PMID column was cut ("1937..."): it has a width, and the first supporting abstract
    is a PubMed link showing its whole PMID (failed before: no column config)."""
    at = braf_page()
    table = candidates_table(at)
    assert table.value.set_index("candidate").loc["Nilotinib", "PubMed"] == (
        f"https://pubmed.ncbi.nlm.nih.gov/{PMID}/")
    config = json.loads(table.proto.columns)
    assert config["PMIDs"]["width"] == "large"
    link = config["PubMed"]
    assert link["width"] >= 90 and link["type_config"]["type"] == "link"  # 10 digits fit
    # the candidate, its flag and the link fit the narrow panel (~290 px) without scrolling
    assert config["candidate"]["pinned"] and sum(
        config[c]["width"] for c in ("candidate", "flag", "PubMed")) <= 280
    assert re.fullmatch(link["type_config"]["display_text"],
                        f"https://pubmed.ncbi.nlm.nih.gov/{PMID}/").group(1) == PMID


def test_the_chosen_candidate_shows_its_sentences_escaped(ws_root):
    at = braf_page()
    picker = at.selectbox(key=next(s.key for s in at.selectbox
                                   if s.key.startswith("sugg_pick_")))
    assert picker.value == "drug:trametinib"  # the best supported first (2 abstracts)
    picker.set_value("drug:nilotinib").run()
    labels = picker.options  # as shown
    assert "BRAF Inhibitor (1) · class" in labels and "Nilotinib (1) · NEW" in labels
    assert "Chemotherapy (1) · generic therapy" in labels
    assert labels[-1].startswith("Gefitinib (") and labels[-1].endswith(" · not with the query")
    (expander,) = [e for e in at.expander if "Sentences supporting" in e.label]
    assert shown(expander.label) == "Sentences supporting Nilotinib (1)"
    (line,) = [t.value for t in expander.text]  # plain text: no markdown, no HTML parsed
    assert line == f"PMID {PMID} · {SENTENCE}"
    assert not [m for m in expander.markdown if "javascript" in m.value]


def test_curate_export_stays_after_adding_and_accepting(ws_root):
    at = braf_page()
    comment = next(t.key for t in at.text_area if t.key.startswith("sugg_comment_"))
    at.text_area(key=comment).input("nilotinib given to BRAF V600E melanoma")
    at.button(key="sugg_add").click().run()
    assert [b.key for b in at.get("download_button")] == ["sugg_export"]
    with Workspace.open(ws_root) as ws:
        (row,) = list_suggestions(ws)
        moderate_suggestion(ws, row.id, "accepted", "", user=User("cur", Role.CURATOR))
    at.run()
    assert [b.key for b in at.get("download_button")] == ["sugg_export"]


def test_review_export_stays_after_accepting_the_last_new_suggestion(ws_root):
    """Item 6: accepting the last "new" suggestion hid the export button (failed before: the
    "new" list was empty and the page returned before the button)."""
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        add_suggestion(ws, user=User("eve", Role.CURATOR), schema=ws.schemas()["PO"],
                       partial=partial, pmid=PMID, answer="Nilotinib",
                       answer_key="drug:nilotinib", comment="named with BRAF V600E")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "cur")
    at.switch_page("app_pages/review.py").run()
    assert [b.key for b in at.get("download_button") if b.key == "sg_export"] == ["sg_export"]
    at.text_input(key="sg_reason").input("names gene, variant and drug")
    at.button(key="sg_accept").click().run()
    assert not at.exception and at.selectbox(key="sg_status").value == "new"
    (export,) = [b for b in at.get("download_button") if b.key == "sg_export"]
    assert export.proto.label == "All 1 suggestions as CSV"


def test_a_rejected_suggestion_shows_as_rejected_on_the_curate_page(ws_root):
    """Issue 36 item 11: Nilotinib, rejected for BRAF V600E, was flagged NEW again (failed
    before: the flag column said NEW). The search ran before the moderation (the page keeps
    it): the flags follow the suggestions as they stand."""
    at = braf_page()
    assert candidates_table(at).value.set_index("candidate").loc["Nilotinib", "flag"] == "NEW"
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        row = add_suggestion(ws, user=User("eve", Role.CURATOR), schema=ws.schemas()["PO"],
                             partial=partial, pmid=PMID, answer="Nilotinib",
                             answer_key="drug:nilotinib", comment="named with BRAF V600E")
        at.run()
        assert candidates_table(at).value.set_index("candidate").loc[
            "Nilotinib", "flag"] == "pending"
        moderate_suggestion(ws, row.id, "rejected", "a cell line", user=User("cur",
                                                                             Role.CURATOR))
    frame = candidates_table(at.run()).value.set_index("candidate")
    assert frame.loc["Nilotinib", "flag"] == "rejected"
    assert frame.loc["Imatinib", "flag"] == "NEW"


def test_review_offers_civic_drafts_of_accepted_suggestions(ws_root):
    """Issue 36 item 13: the Suggestions tab downloads CIViC drafts (CSV and JSON) once a
    suggestion is accepted, and none before."""
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        row = add_suggestion(ws, user=User("eve", Role.CURATOR), schema=ws.schemas()["PO"],
                             partial=partial, pmid=PMID, answer="Nilotinib",
                             answer_key="drug:nilotinib", comment="named with BRAF V600E")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "cur")
    at.switch_page("app_pages/review.py").run()
    assert not [b for b in at.get("download_button") if b.key.startswith("sg_drafts")]
    with Workspace.open(ws_root) as ws:
        moderate_suggestion(ws, row.id, "accepted", "shown", user=User("cur", Role.CURATOR))
    at.run()
    assert not at.exception
    buttons = {b.key: shown(b.proto.label) for b in at.get("download_button")
               if b.key.startswith("sg_drafts")}
    assert buttons == {"sg_drafts_csv": "CIViC drafts (CSV)",
                       "sg_drafts_json": "CIViC drafts (JSON)"}
    assert any("never submitted" in c.value for c in at.caption)
