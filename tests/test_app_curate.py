"""The Curate page (AppTest, no browser): browse, search, highlight, label, undo, suggest."""

from __future__ import annotations

import re

import pytest
from app_helpers import APP, add_users, build_app_workspace, label_rows, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.jobs.queue import list_jobs, wait_for_job
from curation.search.suggestions import list_suggestions
from curation.store.models import Models
from curation.store.relations import Relations
from curation.store.workspace import Workspace

QUERY_KEY = "gene=gene:673|variant=variant:v600e"


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def braf_page(ws_root) -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert not at.exception and not at.error
    return at


def query_input(at: AppTest):
    (query,) = [t for t in at.text_input if t.label == "Query (edit freely)"]
    return query


def cards(at: AppTest) -> list[str]:
    """The HTML of every result card, in page order."""
    return [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]


def doc_html(at: AppTest, doc_id: str) -> str:
    """The HTML of one result card (first line + highlighted abstract)."""
    (card,) = [c for c in cards(at) if f">PMID {doc_id}</a>" in c]
    return card


def control(at: AppTest, prefix: str, doc_id: str):
    """A card's widget by key prefix (``grade`` or ``note``) and document id."""
    widgets = list(at.segmented_control) + list(at.text_input)
    return next(w for w in widgets if w.key and w.key.startswith(f"{prefix}_{doc_id}_"))


def test_browse_filter_and_templated_query(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert at.title[0].value == "kbcurate: KB curation assistant"
    assert at.selectbox(key="schema").value == "PO"
    assert query_input(at).value == "Treatment for gene EGFR and variant L858R?"
    at.text_input(key="flt_PO_treatment").set_value("imatinib").run()
    at.selectbox(key="flt_PO_level").set_value("B").run()
    labels = at.selectbox(key="relation_pick_PO").options
    assert len(labels) == 2 and all("known treatment" in x for x in labels)
    at.selectbox(key="schema").set_value("PTM").run()
    assert query_input(at).value.startswith("Catalysts for the phosphorylation of ")
    at.text_input(key="rel_search").set_value("CAMK2A").run()
    assert " of CAMK2A at " in query_input(at).value
    assert not at.exception


def test_results_show_pmid_link_badge_year_journal_and_highlights(ws_root):
    at = braf_page(ws_root)
    assert query_input(at).value == "Treatment for gene BRAF and variant V600E?"
    html = doc_html(at, "25265492")
    assert '<a href="https://pubmed.ncbi.nlm.nih.gov/25265492/" target="_blank"' in html
    assert "2014" in html and "Test Journal of Oncology" in html
    assert '<span class="kb-badge">cited by KB</span>' in html
    assert "cited by KB" not in doc_html(at, "90100001")
    assert 'data-slot="gene"' in html and 'data-slot="variant"' in html
    assert 'data-slot="treatment"' in html and "kb-legend" in at.markdown[0].value
    at.checkbox(key="hl_treatment").uncheck().run()
    assert 'data-slot="treatment"' not in doc_html(at, "25265492")
    assert 'data-enabled="false"' in next(m.value for m in at.markdown if "kb-legend" in m.value)


def test_label_writes_one_row_with_user_and_model_version_and_undo_removes_it(ws_root):
    at = braf_page(ws_root)
    assert "Labelled 0 of 4 shown" in at.get("progress")[0].proto.text
    control(at, "note", "25265492").input("names both drugs")
    control(at, "grade", "25265492").set_value("complete").run()
    rows = label_rows(ws_root)
    assert len(rows) == 1
    row = rows[0]
    assert (row["user"], row["doc_id"], row["grade"], row["model_version"]) == (
        "alice", "25265492", "complete", "bm25+rerank")  # a new workspace's default ranking
    assert row["query_text"] == "Treatment for gene BRAF and variant V600E?"
    assert row["query_key"] == "gene=gene:673|variant=variant:v600e"
    assert row["note"] == "names both drugs"
    assert "Labelled 1 of 4 shown" in at.get("progress")[0].proto.text
    assert control(at, "grade", "25265492").value == "complete"
    at.run()  # the click re-drew only its card and the toolbar: the whole page back
    position = next(i for i, c in enumerate(cards(at)) if ">PMID 25265492</a>" in c)
    assert position == 3 and "labelled <b>complete</b>" in cards(at)[3]  # it stays in place
    at.toggle(key="unlabelled_first").set_value(False).run()
    at.toggle(key="unlabelled_first").set_value(True).run()
    assert "labelled <b>complete</b>" in cards(at)[-1]  # re-sorted: next unlabelled first
    at.button(key="undo").click().run()
    assert label_rows(ws_root) == []
    assert control(at, "grade", "25265492").value is None
    assert control(at, "note", "25265492").value == ""  # the undone note is gone too
    assert any("Undid your label 'complete' on 25265492" in i.value for i in at.info)
    # undoing a relabel brings back the earlier label's note; the next click saves no stale note
    control(at, "note", "25265492").input("first note")
    control(at, "grade", "25265492").set_value("partial").run()
    control(at, "note", "25265492").input("second note").run()
    assert [r["note"] for r in label_rows(ws_root) if r["superseded_by"] is None] == [
        "second note"]
    at.button(key="undo").click().run()
    assert control(at, "note", "25265492").value == "first note"
    assert control(at, "grade", "25265492").value == "partial"
    assert any("Undid your note edit on 25265492: the note is 'first note' again; its label "
               "'partial' stays." in shown(i.value) for i in at.info)
    control(at, "grade", "25265492").set_value("irrelevant").run()
    assert [(r["grade"], r["note"]) for r in label_rows(ws_root)
            if r["superseded_by"] is None] == [("irrelevant", "first note")]


def test_relabel_supersedes_and_rerank_is_the_model_version(ws_root):
    at = braf_page(ws_root)
    at.checkbox(key="rerank").check().run()
    control(at, "grade", "90100001").set_value("partial").run()
    control(at, "grade", "90100001").set_value("irrelevant").run()
    rows = label_rows(ws_root)
    assert [(r["grade"], r["superseded_by"]) for r in rows] == [
        ("partial", rows[1]["id"]), ("irrelevant", None)]
    assert {r["model_version"] for r in rows} == {"bm25+rerank"}


def test_script_and_img_in_abstracts_render_inert(ws_root):
    at = braf_page(ws_root)
    html = doc_html(at, "90100002")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    everything = "\n".join(m.value for m in at.markdown)
    assert "<script" not in everything and "<img" not in everything
    assert "&lt;b&gt;Evil&lt;/b&gt; [journal](javascript:alert(1))" in html  # journal: text
    assert not re.search(r"href=.javascript", everything)


def test_typed_entities_search(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.radio(key="query_mode").set_value("Type entities").run()
    assert "Type gene, variant" in at.info[0].value
    at.text_input(key="typed_PO_gene").input("PDGFRA")
    at.text_input(key="typed_PO_variant").input("D842V").run()
    assert query_input(at).value == "Treatment for gene PDGFRA and variant D842V?"
    assert any(">PMID 90100003</a>" in c for c in cards(at))


def _walk(node):
    """Every element under an AppTest node, in page order."""
    children = getattr(node, "children", None)
    if not children:
        yield node
        return
    for child in children.values():
        yield from _walk(child)


def test_confirm_a_suggestion_and_errors_show_once(ws_root):
    at = braf_page(ws_root)
    picker = at.selectbox(key=next(s.key for s in at.selectbox
                                   if s.key.startswith("sugg_pick_")))
    picker.set_value("drug:imatinib").run()
    comment_key = next(t.key for t in at.text_area if t.key.startswith("sugg_comment_"))
    at.button(key="sugg_add").click().run()
    assert [shown(e.value) for e in at.error] == [
        "A source suggestion needs a comment (what the abstract shows); CIViC requires one"]
    order = [getattr(n, "key", None) or n.type for n in _walk(at.main)]
    assert order.index("error") == order.index("sugg_add") + 1  # right under the button
    at.run()
    assert not at.error  # shown once, not on every rerun
    at.text_area(key=comment_key).input("one patient, no response")
    at.button(key="sugg_add").click().run()
    with Workspace.open(ws_root) as ws:
        (row,) = list_suggestions(ws)
    assert (row.pmid, row.answer, row.confirmed_by) == ("90100001", "Imatinib", "alice")
    assert any("Source suggestion" in s.value for s in at.success)


def test_missing_index_is_built_by_a_background_job(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = AppTest.from_file(APP, default_timeout=60).run()  # local mode: no users file
    assert any("Building the bm25 index in the background" in i.value for i in at.info)
    with Workspace.open(root) as ws:
        (job,) = list_jobs(ws, "index")
        assert wait_for_job(ws, job.id).status.value == "done"
    at.run()
    assert cards(at) and "<b>#1</b>" in cards(at)[0]
    assert not at.exception


def test_dense_index_is_offered_as_a_background_build_not_built_in_the_page(ws_root):
    at = braf_page(ws_root)
    at.selectbox(key="retriever").set_value("dense").run()
    assert not at.exception
    assert any("The dense index is not built for the current documents yet" in i.value
               for i in at.info)
    assert at.button(key="build_index").label == "Build the dense index in the background"
    with Workspace.open(ws_root) as ws:
        assert list_jobs(ws, "index") == []  # nothing starts until the curator asks


def test_a_note_typed_after_the_label_is_stored_with_it(ws_root):
    at = braf_page(ws_root)
    control(at, "note", "90100002").input("not labelled yet").run()
    assert label_rows(ws_root) == []  # a note alone labels nothing
    control(at, "grade", "90100001").set_value("partial").run()
    control(at, "note", "90100001").input("only one patient").run()
    rows = label_rows(ws_root)
    assert [(r["grade"], r["note"], r["superseded_by"] is None) for r in rows] == [
        ("partial", "", False), ("partial", "only one patient", True)]


def test_sidebar_choices_survive_a_page_switch(ws_root):
    at = braf_page(ws_root)
    at.selectbox(key="schema").set_value("PTM").run()
    at.slider(key="top_k").set_value(20).run()
    at.checkbox(key="rerank").check().run()
    at.switch_page("app_pages/review.py").run()
    assert not at.exception
    at.switch_page("app_pages/curate.py").run()
    assert not at.exception
    assert at.selectbox(key="schema").value == "PTM"
    assert at.slider(key="top_k").value == 20 and at.checkbox(key="rerank").value
    assert at.text_input(key="rel_search").value == "BRAF"


def test_choose_the_knowledge_base(tmp_path, monkeypatch, fixtures_dir):
    root = build_app_workspace(tmp_path / "ws")
    with Workspace.open(root) as ws:
        from curation.store.importer import import_file

        import_file(ws, "kb", "oncokb", fixtures_dir / "oncokb_actionable_sample.tsv",
                    progress=False)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = AppTest.from_file(APP, default_timeout=60).run()  # local mode (no users file)
    assert at.selectbox(key="kb_PO").options == ["(all)", "civic", "oncokb"]
    at.selectbox(key="kb_PO").set_value("oncokb").run()
    assert not at.exception
    with Workspace.open(root) as ws:

        expected = len(Relations(ws).partial("PO", source="oncokb"))
        total = len(Relations(ws).partial("PO"))
    (box,) = [e for e in at.expander if e.label.startswith("Relation table and filters")]
    assert f"{expected:,} partial relations" in shown(box.label)
    assert expected < total


def test_trained_model_versions_are_retriever_choices(ws_root, tiny_model_path):

    with Workspace.open(ws_root) as ws:
        version = Models(ws).register(schema="PO", recipe="edel", base_model="tiny",
                                      model_dir=tiny_model_path, created_by="boss",
                                      manifest={"max_seq_length": 32,
                                                "document_format": "{title} [SEP] {abstract}"})
    at = braf_page(ws_root)
    choice = f"dense · {version.id}"
    assert choice in at.selectbox(key="retriever").options
    at.selectbox(key="retriever").select(choice).run()
    assert any("index is not built" in i.value for i in at.info)
    at.button(key="build_index").click().run()
    with Workspace.open(ws_root) as ws:
        (job,) = [j for j in list_jobs(ws, "index") if j.params.get("options")]
        assert job.params["options"] == {"model": version.id}
        assert wait_for_job(ws, job.id, timeout=120).status == "done"
    at.run()
    assert not at.exception and cards(at)
    control(at, "grade", "90100001").set_value("partial").run()
    (row,) = label_rows(ws_root)
    assert row["model_version"].startswith("dense:PO-edel-1-")


def test_an_empty_query_clears_the_results_and_says_why(ws_root):
    at = braf_page(ws_root)
    assert cards(at)
    query_input(at).set_value("   ").run()
    assert not at.exception and cards(at) == []
    assert any("The query is empty" in i.value for i in at.info)
    assert not [w for w in at.segmented_control if w.key and w.key.startswith("grade_")]
    query_input(at).set_value("BRAF V600E vemurafenib").run()
    assert cards(at)


def test_placeholders_speak_the_schema(ws_root):
    from app_pages.curate_suggestions import comment_placeholder
    from curation.store.workspace import Workspace
    from kb_sources.schema import get_schema

    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.selectbox(key="schema").set_value("PTM").run()
    hint = at.text_input(key="rel_search").placeholder
    assert hint.startswith("Search relations: substrate, ") and "catalyst" in hint
    assert "drug" not in hint
    with Workspace.open(ws_root) as ws:
        schema = get_schema("PTM", ws.schemas())
        partial = Relations(ws).partial("PTM", {})[0]
    text = comment_placeholder(schema, partial, "CAMK2A")
    assert "V600E" not in text and "CAMK2A as the catalyst of " in text
    substrate = partial.query["substrate"][0].text
    assert substrate in text


def test_card_order_is_per_signed_in_user(ws_root):
    at = braf_page(ws_root)
    top = cards(at)[0].split(">PMID ")[1].split("</a>")[0]
    control(at, "grade", top).set_value("irrelevant").run()
    at.toggle(key="unlabelled_first").set_value(False).run()
    at.toggle(key="unlabelled_first").set_value(True).run()
    assert f">PMID {top}</a>" in cards(at)[-1]  # alice's next unlabelled come first
    at.run()  # the toggle re-drew the results panel only (AppTest keeps only that part)
    at.button(key="signout").click().run()
    sign_in(at, "boss")
    at.text_input(key="rel_search").set_value("BRAF").run()
    # alice's label teaches the order learned within the query, which everyone sees; as ranked,
    # boss's own cards keep their places (he labelled none of them)
    (order,) = [r for r in at.radio if r.key and r.key.startswith("screen_order_")]
    order.set_value("as ranked").run()
    assert f">PMID {top}</a>" in cards(at)[0]  # boss has not labelled it: it keeps its rank
    assert "Labelled 0 of 4 shown" in at.get("progress")[0].proto.text


def test_results_naming_no_query_entity_are_flagged(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.radio(key="query_mode").set_value("Type entities").run()
    at.text_input(key="typed_PO_gene").input("FOOBAR1")
    at.text_input(key="typed_PO_variant").input("X123Y").run()
    assert not at.exception
    assert cards(at)  # the template's other words still rank abstracts
    assert any("mentions FOOBAR1, X123Y" in shown(w.value) for w in at.warning)
    at = braf_page(ws_root)  # BRAF V600E abstracts name the entities: no warning
    assert not [w for w in at.warning if "None of these" in w.value]


def test_typed_entities_are_normalised_against_the_kb(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.radio(key="query_mode").set_value("Type entities").run()
    at.text_input(key="typed_PO_gene").input("PDGFRA")
    at.text_input(key="typed_PO_variant").input("p.Asp842Val").run()
    assert not at.exception
    caption = " ".join(shown(c.value) for c in at.caption)
    assert "variant p.Asp842Val → D842V" in caption and "gene PDGFRA → PDGFRA" in caption
    assert "Known treatment in the KB: none" not in caption  # the KB relation was found
    assert query_input(at).value == "Treatment for gene PDGFRA and variant D842V?"
    assert any(">PMID 90100003</a>" in c for c in cards(at))  # the KB relation's evidence
    at.text_input(key="typed_PO_variant").input("X123Y").run()
    caption = " ".join(shown(c.value) for c in at.caption)
    assert "variant X123Y (not in the KB: matched as typed)" in caption


def test_a_click_on_a_relation_row_selects_it(ws_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    first = at.selectbox(key="relation_pick_PO").value
    table = at.dataframe(key="relations_table_PO").value
    assert len(table) > 2
    at.session_state["relations_table_PO"] = {"selection": {"rows": [2], "columns": []}}
    at.run()
    picker = at.selectbox(key="relation_pick_PO")
    assert picker.value != first
    label = shown(picker.format_func(picker.value))
    assert all(str(v) in label for v in table.iloc[2].iloc[:2]), (label, table.iloc[2])
    # the picker stays free afterwards: choosing another relation there is not undone
    picker.set_value(first).run()
    assert at.selectbox(key="relation_pick_PO").value == first


def test_relation_table_columns_fit_whole_entity_names(ws_root):
    """Issue 29, item 3: the table cut "V600E/K and AMPLIFICATION" at its default width; the slot
    columns are "medium" (200 px), the known answers "large"."""
    import json

    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    columns = json.loads(at.dataframe(key="relations_table_PO").proto.columns)
    widths = {name: c.get("width") for name, c in columns.items() if not c.get("hidden")}
    assert widths == {"gene": "medium", "variant": "medium", "known treatment": "large",
                      "n_answers": "small", "n_pmids": "small", "sources": "small"}
    assert columns["n_pmids"]["label"] == "PMIDs"


def test_a_label_click_redraws_its_card_and_the_progress_only(ws_root):
    """Issue 29, item 7: the click re-draws the clicked card and the toolbar (progress, undo),
    not every card: AppTest, like the browser, gets only those elements from that run."""
    at = braf_page(ws_root)
    assert len(cards(at)) == 4
    control(at, "grade", "90100001").set_value("partial").run()
    assert not at.exception
    (card,) = cards(at)  # only the clicked card was drawn again
    assert ">PMID 90100001</a>" in card and "labelled <b>partial</b>" in card
    assert "Labelled 1 of 4 shown" in at.get("progress")[0].proto.text
    at.run()  # the whole page, as the browser still shows it
    assert len(cards(at)) == 4 and "labelled <b>partial</b>" in doc_html(at, "90100001")


# -- issue 36: notes follow the current label, keyboard and bulk grades, the ranking's name ----
def _current(root, doc_id: str) -> list[tuple[str, str]]:
    return [(r["grade"], r["note"]) for r in label_rows(root)
            if r["doc_id"] == doc_id and r["superseded_by"] is None]


def test_a_note_given_on_the_review_page_shows_on_the_card_and_a_regrade_keeps_it(ws_root):
    """Item 2: the card's note field showed nothing for a stored note, and another grade on the
    card stored a label without it."""
    at = braf_page(ws_root)
    control(at, "grade", "25265492").set_value("partial").run()
    at.switch_page("app_pages/review.py").run()
    (label_id,) = [r["id"] for r in label_rows(ws_root)]
    at.selectbox(key="rv_label").set_value(label_id).run()
    at.selectbox(key="rv_new_grade").set_value("partial").run()
    at.text_input(key="rv_new_note").input("names both drugs")
    at.button(key="rv_relabel").click().run()
    assert _current(ws_root, "25265492") == [("partial", "names both drugs")]
    at.switch_page("app_pages/curate.py").run()
    at.selectbox(key="relation_pick_PO").set_value(QUERY_KEY).run()
    assert control(at, "note", "25265492").value == "names both drugs"
    control(at, "grade", "25265492").set_value("complete").run()
    assert _current(ws_root, "25265492") == [("complete", "names both drugs")]
    assert control(at, "note", "25265492").value == "names both drugs"


def test_a_regrade_keeps_a_note_given_meanwhile_in_another_tab(ws_root):
    """The card was drawn before the note was given elsewhere: the curator did not touch the
    field, so the new grade keeps the stored note (not the empty field it was drawn with)."""
    from curation.store.labels import Labels

    at = braf_page(ws_root)
    control(at, "grade", "90100001").set_value("partial").run()
    with Workspace.open(ws_root) as ws:
        Labels(ws).record(user="alice", schema="PO", query_key=QUERY_KEY, doc_id="90100001",
                          query_text="Treatment for gene BRAF and variant V600E?",
                          grade="partial", note="given in the other tab")
    control(at, "grade", "90100001").set_value("irrelevant").run()
    assert _current(ws_root, "90100001") == [("irrelevant", "given in the other tab")]


def test_undo_after_a_note_edit_restores_the_note_and_a_note_alone_labels_nothing(ws_root):
    """Item 1: after the undo the field shows the re-activated label's note (a new field: the
    undone note cannot be sent again); a note typed once the card has no label stores nothing."""
    at = braf_page(ws_root)
    control(at, "grade", "25265492").set_value("partial").run()
    control(at, "note", "25265492").input("dose unclear").run()
    first_key = control(at, "note", "25265492").key
    at.button(key="undo").click().run()
    assert _current(ws_root, "25265492") == [("partial", "")]
    assert control(at, "note", "25265492").value == ""
    assert control(at, "note", "25265492").key != first_key
    # issue 44 item 6: the message says a note edit was undone and the label stays (it said
    # "Undid your label 'partial'" while the card still showed partial)
    assert [shown(i.value) for i in at.info] == [
        "Undid your note edit on 25265492: the note is empty again; its label 'partial' stays."]
    at.button(key="undo").click().run()
    assert label_rows(ws_root) == []
    assert [shown(i.value) for i in at.info] == ["Undid your label 'partial' on 25265492."]
    control(at, "note", "25265492").input("just a thought").run()
    assert label_rows(ws_root) == []  # kept in the field for the next grade, no label
    assert any("Note kept" in c.value for c in at.caption)
    control(at, "grade", "25265492").set_value("skip").run()
    assert _current(ws_root, "25265492") == [("skip", "just a thought")]


def test_keys_grade_the_focused_card_and_selected_cards_get_one_bulk_grade(ws_root):
    """Item 12: the toolbar's grade buttons (keys 1 2 3 0) grade the focused card and move the
    focus on; with cards selected they grade all of them as one batch, and one undo takes the
    batch back. Item 10: the toolbar names the ranking in words."""
    at = braf_page(ws_root)
    assert "ranked by BM25 + entity rerank" in shown(at.get("progress")[0].proto.text)
    shortcuts = {b.key: b.proto.shortcut.lower() for b in at.button
                 if b.key and b.key.startswith("list_")}
    assert {k: shortcuts[k] for k in ("list_complete", "list_partial", "list_irrelevant",
                                      "list_skip", "list_note", "list_prev", "list_next")} == {
        "list_complete": "1", "list_partial": "2", "list_irrelevant": "3", "list_skip": "0",
        "list_note": "n", "list_prev": "k", "list_next": "j"}
    order = [re.search(r">PMID (\d+)</a>", c).group(1) for c in cards(at)]
    at.button(key="list_complete").click().run()
    at.button(key="list_next").click().run()
    at.button(key="list_irrelevant").click().run()
    assert [(r["doc_id"], r["grade"]) for r in label_rows(ws_root)] == [
        (order[0], "complete"), (order[2], "irrelevant")]
    at.run()
    for doc in (order[1], order[3]):
        at.checkbox(key=next(c.key for c in at.checkbox
                             if c.key and c.key.startswith(f"sel_{doc}_"))).check().run()
        at.run()
    at.button(key="list_skip").click().run()
    rows = label_rows(ws_root)
    assert [(r["doc_id"], r["grade"]) for r in rows[2:]] == [(order[1], "skip"),
                                                             (order[3], "skip")]
    assert rows[2]["batch"] == rows[3]["batch"] is not None and rows[0]["batch"] is None
    assert not any(c.value for c in at.checkbox if c.key and c.key.startswith("sel_"))
    at.button(key="undo").click().run()
    assert any("Undid your bulk grade: 2 labels 'skip'" in shown(i.value) for i in at.info)
    assert [(r["doc_id"], r["grade"]) for r in label_rows(ws_root)] == [
        (order[0], "complete"), (order[2], "irrelevant")]


# -- issue 44 item 8: the keyword box (Enter adds; each Add checks its own field; chips) --------
def _keyword_box(at: AppTest):
    (box,) = [e for e in at.sidebar.expander if shown(e.label).startswith("Keywords")]
    return box


def _keyword_messages(at: AppTest) -> list[str]:
    box = _keyword_box(at)
    return [shown(m.value) for kind in ("success", "info", "warning", "error")
            for m in getattr(box, kind)]


def test_keyword_enter_adds_each_add_checks_its_own_field_and_keywords_show_as_chips(ws_root):
    """Item 8: Enter in a keyword field adds its keyword without a word about the other
    field; "Add exclude" clicked on its empty field says what to do, and that note is gone
    after the next successful action; the curator's keywords show as chips (escaped), one
    click removes one."""
    from app_helpers import live_markdown

    from curation.search.keywords import Keywords, get_keywords

    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="kw_new_include").input("BRCA").run()  # Enter in the include field
    assert not at.exception and not at.error
    assert _keyword_messages(at) == ["Added the include keyword **BRCA**."]
    assert shown(_keyword_box(at).label) == "Keywords · 1 include, 0 exclude"
    assert at.pills(key="kw_chips_include_PO").options == ["BRCA ×"]
    assert at.text_input(key="kw_new_include").value == ""  # ready for the next one
    at.button(key="kw_add_exclude").click().run()  # the other Add, its field empty
    assert not at.error
    assert _keyword_messages(at) == [
        "Type an exclude keyword in the field first, then press Enter or click Add exclude."]
    at.text_input(key="kw_new_exclude").input("[review](http://x.org)").run()  # Enter
    assert _keyword_messages(at) == ["Added the exclude keyword **[review](http://x.org)**."]
    (chip,) = at.pills(key="kw_chips_exclude_PO").options
    assert shown(chip) == "[review](http://x.org) ×" and not live_markdown(chip)
    at.run()  # any next action: no message lingers
    assert _keyword_messages(at) == []
    with Workspace.open(ws_root) as ws:
        assert get_keywords(ws, "alice", "PO") == Keywords(("BRCA",), ("[review](http://x.org)",))
    at.pills(key="kw_chips_include_PO").set_value("BRCA").run()  # click the chip: removed
    assert _keyword_messages(at) == ["Removed 1 include keyword: BRCA."]
    assert "No include keywords yet." in [shown(c.value) for c in _keyword_box(at).caption]
    assert not [p for p in at.pills if p.key == "kw_chips_include_PO"]
    with Workspace.open(ws_root) as ws:
        assert get_keywords(ws, "alice", "PO") == Keywords((), ("[review](http://x.org)",))
