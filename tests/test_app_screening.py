"""Screening mode (AppTest): one abstract at a time, grade / note / undo / move buttons with keys.

The key presses themselves are driven in the browser test (tests/test_browser.py); here the same
buttons are clicked and the rows they write are checked.
"""

from __future__ import annotations

import re

import pytest
from app_helpers import APP, add_users, build_app_workspace, label_rows, sign_in
from streamlit.testing.v1 import AppTest

from app_pages.curate_screening import GRADE_KEYS
from curation.store.labels import Grade

QUERY_KEY = "gene=gene:673|variant=variant:v600e"


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def screening(ws_root) -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    at.segmented_control(key="view_mode").set_value("Screening").run()
    assert not at.exception and not at.error
    return at


def shown_doc(at: AppTest) -> str:
    """The PMID of the one abstract on screen."""
    cards = [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]
    assert len(cards) == 1
    return re.search(r">PMID (\d+)</a>", cards[0]).group(1)


def position(at: AppTest) -> tuple[int, int]:
    text = at.get("progress")[0].proto.text
    pos, total = re.search(r"Abstract (\d+) of (\d+)", text).groups()
    return int(pos), int(total)


def test_buttons_carry_the_keys_and_one_abstract_is_shown(ws_root):
    at = screening(ws_root)
    assert GRADE_KEYS == {Grade.COMPLETE: "1", Grade.PARTIAL: "2", Grade.IRRELEVANT: "3",
                          Grade.SKIP: "0"}
    shortcuts = {b.key: b.proto.shortcut.lower() for b in at.button
                 if b.key and b.key.startswith("screen_")}
    assert shortcuts == {"screen_complete": "1", "screen_partial": "2",
                         "screen_irrelevant": "3", "screen_skip": "0", "screen_note_btn": "n",
                         "screen_undo": "u", "screen_prev": "k", "screen_next": "j"}
    assert position(at) == (1, 4)
    shown_doc(at)  # exactly one card


def test_grades_note_undo_and_moves_write_the_right_rows(ws_root):
    at = screening(ws_root)
    first = shown_doc(at)
    at.button(key="screen_complete").click().run()
    assert position(at) == (2, 4)
    second = shown_doc(at)
    assert second != first
    # N, a note, Enter: the note waits for the grade, then is stored with it
    at.button(key="screen_note_btn").click().run()
    at.text_input(key="screen_note").input("dose in methods only").run()
    assert any("Note waiting for a grade" in c.value for c in at.caption)
    at.button(key="screen_irrelevant").click().run()
    third = shown_doc(at)
    at.button(key="screen_partial").click().run()
    rows = [(r["doc_id"], r["grade"], r["note"]) for r in label_rows(ws_root)]
    assert rows == [(first, "complete", ""), (second, "irrelevant", "dose in methods only"),
                    (third, "partial", "")]
    # U: the last label goes, and the abstract it was on comes back
    at.button(key="screen_undo").click().run()
    assert shown_doc(at) == third and position(at) == (3, 4)
    assert [r["doc_id"] for r in label_rows(ws_root)] == [first, second]
    at.button(key="screen_skip").click().run()
    # K back to the second abstract, a note on a labelled abstract relabels it (audited)
    at.button(key="screen_prev").click().run()
    at.button(key="screen_prev").click().run()
    assert shown_doc(at) == second
    at.button(key="screen_note_btn").click().run()
    at.text_input(key="screen_note").input("checked twice").run()
    current = [(r["doc_id"], r["grade"], r["note"]) for r in label_rows(ws_root)
               if r["superseded_by"] is None]
    assert current == [(first, "complete", ""), (third, "skip", ""),
                       (second, "irrelevant", "checked twice")]
    at.button(key="screen_next").click().run()
    assert shown_doc(at) == third


def test_the_last_abstract_says_the_list_is_done(ws_root):
    at = screening(ws_root)
    for _ in range(4):
        at.button(key="screen_complete").click().run()
    assert position(at) == (4, 4)
    assert at.success and "End of the list: 4 of 4" in at.success[0].value
    assert at.button(key="screen_next").disabled


def test_the_counter_names_the_queue_place_and_the_rank(ws_root):
    """Issue 29, item 4: with the two top-ranked abstracts labelled and the list re-sorted
    (unlabelled first), screening opens on rank #3 as the first of its queue; the counter says
    both ("Abstract 1 of 4 · rank #3"), as the card's "#3" does."""
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    top = [re.search(r">PMID (\d+)</a>", m.value).group(1) for m in at.markdown
           if m.value.startswith('<div class="kb-meta">')][:2]  # rank order: nothing labelled
    for doc in top:
        next(w for w in at.segmented_control if w.key.startswith(f"grade_{doc}_")) \
            .set_value("irrelevant").run()
        at.run()  # a label click re-draws only its card: the whole page back
    # issue 43: the labels now order the list learned within the query (on BM25 too); this
    # test is about the counter, so the list stays as ranked
    (order,) = [r for r in at.radio if r.key and r.key.startswith("screen_order_")]
    order.set_value("as ranked").run()
    at.toggle(key="unlabelled_first").set_value(False).run()
    at.toggle(key="unlabelled_first").set_value(True).run()  # re-sorted: unlabelled first
    at.run()
    at.segmented_control(key="view_mode").set_value("Screening").run()
    card = next(m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">'))
    rank = int(re.search(r"<b>#(\d+)</b>", card).group(1))
    assert position(at) == (1, 4) and rank == 3
    assert "Abstract 1 of 4 · rank #3 · labelled 2" in at.get("progress")[0].proto.text


def test_a_reload_opens_the_same_abstract_in_screening_mode(ws_root):
    """Issue 29, item 4: the URL keeps the view and the abstract on screen (by id: its place in
    the queue changes as labels reorder it); a new session with that URL opens it."""
    at = screening(ws_root)
    at.button(key="screen_complete").click().run()
    at.button(key="screen_skip").click().run()
    third = shown_doc(at)
    assert at.query_params["view"] == "screening" and at.query_params["doc"] == third
    reload = AppTest.from_file(APP, default_timeout=60)
    reload.query_params.update(at.query_params)
    sign_in(reload.run(), "alice")
    assert not reload.exception and not reload.error
    assert reload.segmented_control(key="view_mode").value == "Screening"
    assert shown_doc(reload) == third
    # labelled ones moved to the end of the new queue; the two unlabelled ones come first, in
    # the order learned within the query from the first label (issue 43: on BM25 too)
    assert position(reload) in ((1, 4), (2, 4))
    reload.segmented_control(key="view_mode").set_value("List").run()
    assert "view" not in reload.query_params and "doc" not in reload.query_params


def test_undo_brings_back_the_note_typed_for_the_abstract(ws_root):
    """Issue 29, item 4: U after a grade given with a note: the abstract comes back with its
    note waiting for the grade, and the next grade stores it."""
    at = screening(ws_root)
    first = shown_doc(at)
    at.button(key="screen_note_btn").click().run()
    at.text_input(key="screen_note").input("dose unclear").run()
    at.button(key="screen_partial").click().run()
    assert shown_doc(at) != first
    at.button(key="screen_undo").click().run()
    assert shown_doc(at) == first and label_rows(ws_root) == []
    assert any("Note waiting for a grade: dose unclear" in c.value for c in at.caption)
    at.button(key="screen_irrelevant").click().run()
    assert [(r["doc_id"], r["grade"], r["note"]) for r in label_rows(ws_root)] == [
        (first, "irrelevant", "dose unclear")]


def test_a_stored_note_shows_opens_in_the_note_field_and_a_new_grade_keeps_it(ws_root):
    """Issue 36, item 2: screening showed nothing of a stored note, N opened an empty field and
    the next grade key stored the label without the note."""
    from curation.store.labels import Labels
    from curation.store.workspace import Workspace

    at = screening(ws_root)
    first = shown_doc(at)
    with Workspace.open(ws_root) as ws:  # as the Review page stores it
        Labels(ws).record(user="alice", schema="PO", query_key=QUERY_KEY, doc_id=first,
                          query_text="Treatment for gene BRAF and variant V600E?",
                          grade="partial", note="names both drugs")
    at.run()
    assert shown_doc(at) == first
    assert any("Note: names both drugs" in c.value for c in at.caption)
    assert "ranked by BM25 \\+ entity rerank" in at.get("progress")[0].proto.text
    at.button(key="screen_note_btn").click().run()
    assert at.text_input(key="screen_note").value == "names both drugs"
    at.text_input(key="screen_note").input("names both drugs").run()  # Enter, unchanged
    assert len(label_rows(ws_root)) == 1
    at.button(key="screen_complete").click().run()
    rows = [(r["grade"], r["note"], r["superseded_by"] is None) for r in label_rows(ws_root)]
    assert rows == [("partial", "names both drugs", False), ("complete", "names both drugs", True)]
    # undo: the earlier label comes back with its note, shown as its note (no draft waiting)
    at.button(key="screen_undo").click().run()
    assert shown_doc(at) == first
    assert any("Note: names both drugs" in c.value for c in at.caption)
    assert not any("Note waiting for a grade" in c.value for c in at.caption)


@pytest.fixture
def long_root(tmp_path, monkeypatch):
    """The app workspace with 20 more BRAF V600E abstracts: the query's ranking is longer than
    the 10 abstracts shown."""
    from curation.search.indexing import get_index
    from curation.store.importer import import_items
    from curation.store.workspace import Workspace
    from kb_sources.types import Document

    root = build_app_workspace(tmp_path / "ws", bm25=False)
    topics = ("melanoma", "thyroid cancer", "colorectal cancer", "glioma", "lung cancer")
    docs = [Document(str(91200000 + i), f"BRAF V600E in {topics[i % 5]}: case series {i}",
                     f"Patients with BRAF V600E {topics[i % 5]} were treated; series {i} "
                     f"reports {'response' if i % 2 else 'resistance'} to therapy.",
                     source="handmade") for i in range(20)]
    with Workspace.open(root) as ws:
        import_items(ws, docs, reader="test", path="handmade", progress=False)
        get_index(ws, "bm25", progress=False)
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def counter(at: AppTest) -> tuple[int, int]:
    """(place, total) of "Abstract 11 of 1,000" (thousands separators allowed)."""
    text = at.get("progress")[0].proto.text
    pos, total = re.search(r"Abstract ([\d,]+) of ([\d,]+)", text).groups()
    return int(pos.replace(",", "")), int(total.replace(",", ""))


def test_screening_goes_on_past_the_shown_list_through_the_queue(long_root):
    """Issue 43, item 4: screening mode ended at "Abstract 10 of 10" (J did nothing) until the
    sidebar's "Abstracts to show" was raised; now J on the tenth shows the queue's next
    candidate ("Abstract 11 of N"), fetched when shown; K goes back through it, and a label on
    it records what ranked it and the order learned after the relation's labels."""
    at = screening(long_root)
    pos, total = counter(at)
    assert pos == 1 and total > 10
    listed = []
    for _ in range(9):
        listed.append(shown_doc(at))
        at.button(key="screen_next").click().run()
    listed.append(shown_doc(at))
    assert counter(at) == (10, total) and not at.button(key="screen_next").disabled
    at.button(key="screen_next").click().run()
    assert not at.exception and counter(at) == (11, total)
    eleventh = shown_doc(at)
    assert eleventh not in listed
    assert "rank #11 ·" in at.get("progress")[0].proto.text
    at.button(key="screen_prev").click().run()
    assert counter(at) == (10, total) and shown_doc(at) == listed[-1]
    at.button(key="screen_next").click().run()
    assert shown_doc(at) == eleventh
    at.button(key="screen_complete").click().run()  # a grade moves on: the 12th, learned
    assert counter(at) == (12, total) and shown_doc(at) not in {*listed, eleventh}
    at.button(key="screen_irrelevant").click().run()
    rows = [(r["doc_id"], r["grade"], r["model_version"], r["order_labels"])
            for r in label_rows(long_root)]
    assert rows[0] == (eleventh, "complete", "bm25+rerank", None)  # no label before: as ranked
    assert rows[1][1:] == ("irrelevant", "bm25+rerank", 1)  # learned after the first label
