"""Importing into the workspace: idempotent, audited, all or nothing in short batches, merge
rules."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from curation.store.errors import WorkspaceBusyError
from curation.store.importer import import_items
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import InputFormatError, SchemaError
from kb_sources.types import Annotation, Document, Entity, Relation

REPO_ROOT = Path(__file__).resolve().parents[1]


def po(record_id: str, gene: str, variant: str, drugs: list[str], pmids=("1",), **attrs):
    return Relation(
        schema="PO", source="civic", record_id=record_id,
        slots={"gene": (Entity(gene, "gene", synonyms=(gene.lower() + "-alias",)),),
               "variant": (Entity(variant, "variant"),),
               "treatment": tuple(Entity(d, "drug") for d in drugs)},
        pmids=tuple(pmids), attributes={k: str(v) for k, v in attrs.items()})


def doc(pmid: str, title: str, abstract: str = "An abstract.", source="pool", **kw):
    return Document(doc_id=pmid, title=title, abstract=abstract, source=source, **kw)


def run(ws, items, reader="kb:test"):
    return import_items(ws, items, reader=reader, path="mem", progress=False)


def test_second_import_adds_nothing(tmp_workspace):
    items = [doc("1", "BRAF V600E"), po("EID1", "BRAF", "V600E", ["Vemurafenib"]),
             po("EID2", "BRAF", "V600E", ["Dabrafenib", "Trametinib"], pmids=("2", "3"))]
    first = run(tmp_workspace, items)
    assert (first.documents_added, first.relations_added) == (1, 2)
    second = run(tmp_workspace, items)
    assert (second.added, second.updated, second.unchanged) == (0, 0, 3)
    stats = tmp_workspace.stats()
    assert stats.relations == 2 and stats.documents == 1 and stats.relations_with_pmids == 2
    assert stats.partial_relations_by_schema == {"PO": 1}
    imports = tmp_workspace.conn.execute("SELECT added FROM imports ORDER BY id").fetchall()
    assert [r[0] for r in imports] == [3, 0]


def test_changed_record_is_updated_and_audited(tmp_workspace):
    run(tmp_workspace, [po("EID1", "BRAF", "V600E", ["Vemurafenib"], level="B")])
    report = run(tmp_workspace, [po("EID1", "BRAF", "V600E", ["Vemurafenib"], level="A")])
    assert report.relations_updated == 1 and report.relations_added == 0
    (entry,) = tmp_workspace.audit_log("relation")
    assert entry.object_id == "civic:EID1" and entry.action == "update"
    assert entry.before_value()["attributes"]["level"] == "B"
    assert entry.after_value()["attributes"]["level"] == "A"
    (pr,) = Relations(tmp_workspace).partial("PO")
    assert pr.attributes["level"] == ("A",)


def test_reader_error_midway_leaves_workspace_unchanged(tmp_workspace):
    run(tmp_workspace, [doc("1", "kept")])

    def broken():
        yield doc("2", "new doc")
        yield po("EID9", "KRAS", "G12C", ["Sotorasib"])
        raise InputFormatError("bad.tsv", "row has 50 fields but the header has 41", line=7)

    with pytest.raises(InputFormatError, match="bad.tsv, line 7"):
        run(tmp_workspace, broken())
    stats = tmp_workspace.stats()
    assert (stats.documents, stats.relations, stats.entities) == (1, 0, 0)
    assert tmp_workspace.conn.execute("SELECT COUNT(*) FROM imports").fetchone()[0] == 1


def test_unknown_schema_is_refused(tmp_workspace):
    rel = Relation("GO", "x", "1", {"a": (Entity("A", "gene"),)})
    with pytest.raises(SchemaError, match="schema 'GO'.*kbcurate schema add"):
        run(tmp_workspace, [rel])


def test_missing_query_slot_is_refused(tmp_workspace):
    rel = Relation("PO", "x", "1", {"gene": (Entity("BRAF", "gene"),)})
    with pytest.raises(SchemaError, match="leaves query slot\\(s\\) variant"):
        run(tmp_workspace, [rel])


def test_document_merge_first_source_owns_text(tmp_workspace):
    run(tmp_workspace, [doc("7", "Pool title", "Pool abstract", source="pool")])
    enriched = doc("7", "XML title", "XML abstract", source="pubmed-xml", journal="Blood",
                   year=2005, mesh=("Humans",), references=("11",))
    report = run(tmp_workspace, [enriched])
    assert report.documents_updated == 1
    row = tmp_workspace.conn.execute("SELECT * FROM documents WHERE doc_id='7'").fetchone()
    assert (row["title"], row["journal"], row["year"]) == ("Pool title", "Blood", 2005)
    assert json.loads(row["mesh"]) == ["Humans"] and json.loads(row["refs"]) == ["11"]
    # re-importing both sources again changes nothing (no flip-flop)
    again = [run(tmp_workspace, [doc("7", "Pool title", "Pool abstract", source="pool")]),
             run(tmp_workspace, [enriched])]
    assert [r.documents_unchanged for r in again] == [1, 1]
    # the owning source may correct its own text
    fixed = run(tmp_workspace, [doc("7", "Pool title, corrected", "Pool abstract", source="pool")])
    assert fixed.documents_updated == 1
    (entry,) = [e for e in tmp_workspace.audit_log("document")][:1]
    assert entry.after_value()["title"] == "Pool title, corrected"


def test_annotations_added_once(tmp_workspace):
    ann = (Annotation(0, 4, "BRAF", "Gene", ("673",)),)
    run(tmp_workspace, [doc("5", "BRAF in melanoma")])
    r1 = run(tmp_workspace, [doc("5", "BRAF in melanoma", source="biored", annotations=ann)])
    r2 = run(tmp_workspace, [doc("5", "BRAF in melanoma", source="biored", annotations=ann)])
    assert (r1.documents_updated, r2.documents_unchanged) == (1, 1)
    rows = tmp_workspace.conn.execute("SELECT start, end, text, ids FROM annotations").fetchall()
    assert [tuple(r) for r in rows] == [(0, 4, "BRAF", '["673"]')]


def test_partial_relations_group_filter_and_answers(tmp_workspace):
    run(tmp_workspace, [
        po("EID1", "BRAF", "V600E", ["Vemurafenib"], pmids=("1",), evidence_level="A"),
        po("EID2", "BRAF", "V600E", ["Dabrafenib", "Trametinib"], pmids=("2", "3")),
        po("EID3", "EGFR", "T790M", ["Osimertinib"], pmids=("4",), evidence_level="B"),
    ])
    rows = Relations(tmp_workspace).partial("po")
    assert [p.query["gene"][0].text for p in rows] == ["BRAF", "EGFR"]
    braf = rows[0]
    assert braf.answer_texts() == ["Vemurafenib", "Dabrafenib + Trametinib"]
    assert braf.pmids == ("1", "2", "3") and braf.n_records == 2
    assert braf.query_key == "gene=gene:braf|variant=variant:v600e"
    from kb_sources.schema import builtin_schemas
    assert braf.render(builtin_schemas()["PO"]).text == "Treatment for gene BRAF and variant V600E?"
    # slot filter matches text and synonyms, case-insensitive; attribute filters work too
    assert [p.query["gene"][0].text for p in Relations(tmp_workspace).partial(
        "PO", {"gene": "egf"})] == ["EGFR"]
    assert len(Relations(tmp_workspace).partial("PO", {"gene": "braf-ALIAS"})) == 1
    assert [p.query["gene"][0].text for p in Relations(tmp_workspace).partial(
        "PO", {"evidence_level": "b"})] == ["EGFR"]
    assert Relations(tmp_workspace).partial("PO", {"gene": "%"}) == []
    syn = {r[0] for r in tmp_workspace.conn.execute("SELECT synonym FROM synonyms")}
    assert {"BRAF", "braf-alias", "Osimertinib"} <= syn


# -- short batches, still all or nothing ------------------------------------------------------
TABLES = ("documents", "annotations", "relations", "relation_slots", "relation_pmids",
          "entities", "synonyms", "citations", "mesh_tree", "audit_log", "imports", "import_undo",
          "labels")


def dump(ws) -> dict[str, list[tuple]]:
    """Every row of every table an import touches, in a stable order."""
    return {t: sorted(tuple(r) for r in ws.conn.execute(f"SELECT * FROM {t}")) for t in TABLES}


def seed(ws):
    ann = (Annotation(0, 4, "BRAF", "Gene", ("673",)),)
    run(ws, [doc("1", "Pool title", source="pool"),
             doc("5", "BRAF in melanoma", source="biored", annotations=ann),
             po("EID1", "BRAF", "V600E", ["Vemurafenib"], level="B")])


def changes_then_fail(after: int):
    """An import that updates existing rows and adds new ones, then fails after ``after``."""
    items = [doc("1", "XML title", source="pubmed-xml", journal="Blood", mesh=("Humans",)),
             doc("5", "BRAF in melanoma", source="biored",
                 annotations=(Annotation(0, 4, "BRAF", "Gene", ("999",)),)),
             po("EID1", "BRAF", "V600E", ["Vemurafenib"], level="A"),
             *[doc(str(100 + i), f"new {i}") for i in range(6)],
             po("EID2", "KRAS", "G12C", ["Sotorasib"], pmids=("100",))]
    yield from items[:after]
    raise InputFormatError("bad.tsv", "row has 50 fields but the header has 41", line=7)


def test_import_commits_in_batches_so_labels_get_through(tmp_workspace):

    seen = {}

    def items():
        for i in range(30):
            if i == 25:  # a curator labels while the import runs (another connection)
                with Workspace.open(tmp_workspace.root) as other, other.lock_wait(0):
                    seen["docs"] = other.stats().documents
                    seen["status"] = other.conn.execute(
                        "SELECT status FROM imports ORDER BY id DESC").fetchone()[0]
                    seen["label"] = Labels(other).record(
                        user="ann", schema="PO", query_key="q", query_text="t", doc_id="1",
                        grade="complete").id
            yield doc(str(i), f"title {i}")

    report = import_items(tmp_workspace, items(), reader="docs:test", path="mem",
                          progress=False, batch_size=10)
    assert report.documents_added == 30
    assert seen == {"docs": 20, "status": "running", "label": 1}
    assert tuple(tmp_workspace.conn.execute("SELECT status, added FROM imports").fetchone()) == (
        "done", 30)
    stamped = tmp_workspace.conn.execute(
        "SELECT COUNT(*) FROM documents WHERE import_id = 1").fetchone()[0]
    assert stamped == 30


def test_failed_import_rolls_back_every_committed_batch(tmp_workspace):
    seed(tmp_workspace)
    before = dump(tmp_workspace)
    with pytest.raises(InputFormatError, match="bad.tsv, line 7"):
        import_items(tmp_workspace, changes_then_fail(after=10), reader="kb:test", path="mem",
                     progress=False, batch_size=2)
    assert dump(tmp_workspace) == before


def kill_an_import_half_way(root: Path) -> None:
    """Run an import of :func:`changes_then_fail` in a process that is killed (-9) after four
    committed batches of two."""
    import signal
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, signal
        from tests.test_importer import changes_then_fail
        from curation.store.importer import import_items
        from curation.store.workspace import Workspace

        def killed():
            for n, item in enumerate(changes_then_fail(after=10)):
                if n == 8:
                    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 half-way
                yield item

        import_items(Workspace.open({str(root)!r}), killed(), reader="kb:test", path="mem",
                     progress=False, batch_size=2)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_killed_import_is_rolled_back_on_next_open(tmp_workspace):
    seed(tmp_workspace)
    before = dump(tmp_workspace)
    root = tmp_workspace.root
    tmp_workspace.close()
    kill_an_import_half_way(root)
    raw = sqlite3.connect(root / "workspace.sqlite")
    assert raw.execute("SELECT status FROM imports ORDER BY id DESC").fetchone() == ("running",)
    assert raw.execute("SELECT COUNT(*) FROM documents").fetchone()[0] > 2  # batches committed
    raw.close()
    with Workspace.open(root) as ws:
        assert dump(ws) == before


def test_second_import_while_one_runs_is_refused(tmp_workspace):
    import os

    tmp_workspace.conn.execute(
        "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, unchanged, "
        "status, pid) VALUES ('t', 'cli', 'kb', 'kb:civic', 'big.tsv', '', 0, 0, 0, "
        "'running', ?)", (os.getpid(),))
    with pytest.raises(WorkspaceBusyError, match=r"Another import is running in workspace .* "
                       r"\(import #1 of big.tsv, process \d+, started t\); retry when it has "
                       r"finished"):
        run(tmp_workspace, [doc("1", "t")])
    assert tmp_workspace.stats().documents == 0


def test_import_left_by_dead_process_is_cleaned_before_the_next(tmp_workspace):
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    tmp_workspace.conn.execute(
        "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, unchanged, "
        "status, pid) VALUES ('t', 'cli', 'docs', 'docs:x', 'old', '', 0, 0, 0, 'running', ?)",
        (dead.pid,))
    tmp_workspace.conn.execute(
        "INSERT INTO documents(doc_id, title, abstract, source, content_hash, added_at, "
        "updated_at, import_id) VALUES ('77', 'half', '', 'x', 'h', 't', 't', 1)")
    report = run(tmp_workspace, [doc("1", "t")])
    assert report.documents_added == 1
    assert [r[0] for r in tmp_workspace.conn.execute("SELECT doc_id FROM documents")] == ["1"]
    assert [tuple(r) for r in tmp_workspace.conn.execute("SELECT path, status FROM imports")] == [
        ("mem", "done")]


def test_failed_pair_import_rolls_back(tmp_workspace):
    from curation.store.importer import insert_pairs

    sql = "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)"
    insert_pairs(tmp_workspace, sql, [("1", "2")], reader="citations", path="a", actor="cli")
    before = dump(tmp_workspace)

    def edges():
        for i in range(2500):
            yield ("1", str(i))
        raise InputFormatError("c.tsv", "not two PMIDs", line=2501)

    with pytest.raises(InputFormatError, match="line 2501"):
        insert_pairs(tmp_workspace, sql, edges(), reader="citations", path="b", actor="cli")
    assert dump(tmp_workspace) == before
    added = insert_pairs(tmp_workspace, sql, [("1", "2"), ("1", "3")], reader="citations",
                         path="c", actor="cli")
    assert added == 1


def test_a_labelled_document_keeps_the_text_its_label_was_given_on(tmp_workspace):
    """Issue 42: a PubMed record for a labelled PMID (a correction, or a record a server slipped
    in) once replaced its title under the label; now the text stays, the offered one is audited
    and the report says so, while an unlabelled document of the same import still updates."""
    ws = tmp_workspace
    run(ws, [doc("26878440", "BRAF V600E in melanoma", source="pubmed"),
             doc("26878441", "KRAS G12C in lung cancer", source="pubmed")], reader="docs:t")
    Labels(ws).record(user="ann", schema="PO", query_key="q", query_text="BRAF V600E",
                      doc_id="26878440", grade="complete")
    report = run(ws, [doc("26878440", "HIJACKED TITLE 26878440", "Planted text.",
                          source="pubmed", journal="J Planted"),
                      doc("26878441", "KRAS G12C in NSCLC", source="pubmed")], reader="docs:t")
    title, abstract, journal = ws.conn.execute(
        "SELECT title, abstract, journal FROM documents WHERE doc_id = '26878440'").fetchone()
    assert (title, abstract) == ("BRAF V600E in melanoma", "An abstract.")
    assert journal == "J Planted"  # fields a label was not given on still update
    assert ws.conn.execute("SELECT title FROM documents WHERE doc_id = '26878441'"
                           ).fetchone()[0] == "KRAS G12C in NSCLC"
    assert report.documents_held == 1 and report.documents_updated == 2
    assert "1 labelled document(s) kept the text" in report.summary()
    (held,) = [e for e in ws.audit_log("document") if e.action == "held"]
    assert held.object_id == "26878440"
    assert held.after_value() == {"title": "HIJACKED TITLE 26878440",
                                  "abstract": "Planted text."}
