"""The PubMed baseline import (issue 37): NLM's files in order, resumable, deletions applied.

Reader (kb_sources/pubmed_baseline.py): file order, MD5 sidecars, citations and DeleteCitation
in file order with their versions. Import (curation/store/baseline.py): revisions replace older
versions, the highest <PMID Version> wins, deletions remove documents except labelled ones (kept
and flagged), one import per file so a failure or a kill -9 mid-file rolls that file back and
the rerun resumes there, and a rerun changes nothing. Fixtures: tests/fixtures/pubmed_baseline
(a gzip baseline file with its .md5, an update file with a revision, an older version and a
DeleteCitation).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from curation.cli.main import main
from curation.store.baseline import import_baseline
from curation.store.baseline_files import BaselineFiles
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError, InputFormatError
from kb_sources.pubmed_baseline import (
    Citation,
    Deletion,
    baseline_files,
    check_md5,
    read_baseline_file,
)

FIXTURE = Path(__file__).parent / "fixtures" / "pubmed_baseline"
BASE = FIXTURE / "baseline" / "pubmed25n0001.xml.gz"
UPDATE = FIXTURE / "updatefiles" / "pubmed25n0002.xml"
REPO_ROOT = Path(__file__).resolve().parents[1]
Q = {"schema": "PO", "query_key": "gene=gene:673", "query_text": "Treatment for gene BRAF?"}
#: A third file: one new citation.
THIRD = UPDATE.read_text(encoding="utf-8").split("<PubmedArticleSet>")[0] + (
    "<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID Version=\"1\">95000006</PMID>"
    "<Article><ArticleTitle>NRAS Q61R in melanoma.</ArticleTitle></Article></MedlineCitation>"
    "</PubmedArticle></PubmedArticleSet>\n")


def folder(tmp_path: Path, *, third: bool = False, name: str = "nlm") -> Path:
    """A copy of the fixture folder (optionally with a third file)."""
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    if third:
        (out / "updatefiles" / "pubmed25n0003.xml").write_text(THIRD, encoding="utf-8")
    return out


def state(ws: Workspace) -> dict[str, object]:
    """What a baseline import leaves, without timestamps (comparable across workspaces)."""
    ledger = BaselineFiles(ws)
    return {
        "documents": {i: (r.title, r.abstract) for i, r in
                      Documents(ws).rows_by_id(sorted(Documents(ws).ids())).items()},
        "hashes": Documents(ws).corpus_hashes(),
        "ledger": [(r.name, r.status, r.added, r.updated, r.unchanged, r.deleted, r.kept,
                    r.md5_checked) for r in ledger.rows()],
        "deletions": ledger.deletions(),
        "versions": ledger.versions(),
    }


# -- reading ----------------------------------------------------------------------------------

def test_update_file_yields_citations_and_deletions_in_file_order():
    items = list(read_baseline_file(UPDATE))
    assert [(type(i).__name__, i.document.doc_id if isinstance(i, Citation) else i.pmid,
             i.version) for i in items] == [
        ("Citation", "95000002", 1), ("Citation", "95000004", 1), ("Citation", "95000005", 1),
        ("Deletion", "95000003", 1), ("Deletion", "95000001", 1), ("Deletion", "95999999", 1)]
    assert items[0].document.title == "EGFR in lung cancer (revised)."
    assert items[0].document.source == "pubmed-baseline"


def test_the_real_2016_medline_file_ends_with_its_delete_citation(data_dir: Path):
    items = list(read_baseline_file(data_dir / "medline_sample" / "medline16n0902_sample.xml.gz"))
    assert sum(isinstance(i, Citation) for i in items) == 604
    assert items[-1] == Deletion("26432306", 1)


def test_files_come_in_nlm_order_from_the_folder_and_its_subfolders(tmp_path: Path):
    for name in ("updatefiles/pubmed25n1275.xml.gz", "baseline/pubmed25n0010.xml.gz",
                 "baseline/pubmed25n0009.xml", "pubmed25n0002.xml.gz", "notes.txt",
                 "baseline/pubmed25n0009.xml.gz.md5"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert [p.name for p in baseline_files(tmp_path)] == [
        "pubmed25n0002.xml.gz", "pubmed25n0009.xml", "pubmed25n0010.xml.gz",
        "pubmed25n1275.xml.gz"]
    (tmp_path / "updatefiles" / "pubmed25n0010.xml.gz").write_text("x")
    with pytest.raises(InputFormatError, match="also at .*baseline/pubmed25n0010.xml.gz"):
        baseline_files(tmp_path)
    with pytest.raises(InputFormatError, match="notes.txt: not a folder"):
        baseline_files(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFormatError, match="holds no .xml.gz or .xml file"):
        baseline_files(tmp_path / "empty")


def test_md5_sidecars_are_checked(tmp_path: Path):
    nlm = folder(tmp_path)
    base = nlm / "baseline" / BASE.name
    assert check_md5(base) is True
    assert check_md5(nlm / "updatefiles" / UPDATE.name) is False  # no sidecar
    base.with_name(base.name + ".md5").write_text(f"MD5({base.name})= {'0' * 32}\n")
    with pytest.raises(InputFormatError, match=r"MD5 7b52a6f8.* differs from 0{32}.*again"):
        check_md5(base)
    base.with_name(base.name + ".md5").write_text("nothing here\n")
    with pytest.raises(InputFormatError, match="holds no MD5 checksum"):
        check_md5(base)


def test_a_delete_citation_without_a_numeric_pmid_names_the_file(tmp_path: Path):
    bad = tmp_path / "pubmed25n0001.xml"
    bad.write_text("<PubmedArticleSet><DeleteCitation><PMID>12a</PMID></DeleteCitation>"
                   "</PubmedArticleSet>")
    with pytest.raises(InputFormatError, match=r"pubmed25n0001.xml, record DeleteCitation: "
                                               r"DeleteCitation holds PMID '12a'"):
        list(read_baseline_file(bad))


# -- importing --------------------------------------------------------------------------------

def test_import_applies_revisions_versions_and_deletions(tmp_workspace, tmp_path: Path):
    report = import_baseline(tmp_workspace, folder(tmp_path), progress=False)
    got = state(tmp_workspace)
    assert got["documents"] == {
        "95000002": ("EGFR in lung cancer (revised).",
                     "Erlotinib and osimertinib in EGFR L858R lung cancer."),
        "95000004": ("ALK fusions in lung cancer.", "Crizotinib in EML4-ALK lung cancer."),
        "95000005": ("A versioned citation, version 2.", "The second version of this article.")}
    assert tmp_workspace.stats().documents_by_source == {"pubmed-baseline": 3}
    assert got["ledger"] == [("pubmed25n0001.xml.gz", "done", 4, 0, 0, 0, 0, True),
                             ("pubmed25n0002.xml", "done", 1, 1, 0, 2, 0, False)]
    assert got["deletions"] == [("95000001", "pubmed25n0002.xml", False),
                                ("95000003", "pubmed25n0002.xml", False),
                                ("95999999", "pubmed25n0002.xml", False)]
    assert got["versions"] == {"95000005": 2}
    assert [(f.older, f.deleted) for f in report.files] == [(0, 0), (1, 2)]
    deletes = {e.object_id for e in tmp_workspace.audit_log("document") if e.action == "delete"}
    assert deletes == {"95000001", "95000003"}


def test_a_labelled_document_nlm_deletes_is_kept_and_flagged(tmp_workspace, tmp_path: Path):
    nlm = folder(tmp_path)
    later = tmp_path / "later"
    shutil.move(nlm / "updatefiles", later)
    import_baseline(tmp_workspace, nlm, progress=False)
    Labels(tmp_workspace).record(user="ann", doc_id="95000001", grade="complete", **Q)
    shutil.move(later, nlm / "updatefiles")
    report = import_baseline(tmp_workspace, nlm, progress=False)
    assert [f.skipped for f in report.files] == [True, False]
    assert report.kept == ("95000001",)
    assert "1 deleted by NLM but kept because labelled" in report.summary()
    got = state(tmp_workspace)
    assert "95000001" in got["documents"] and "95000003" not in got["documents"]
    assert ("95000001", "pubmed25n0002.xml", True) in got["deletions"]
    assert BaselineFiles(tmp_workspace).deletions(kept_only=True) == [
        ("95000001", "pubmed25n0002.xml", True)]
    assert got["ledger"][1][5:7] == (1, 1)  # one deleted, one kept
    assert [x.doc_id for x in Labels(tmp_workspace).find()] == ["95000001"]


def test_a_rerun_changes_nothing(tmp_workspace, tmp_path: Path):
    nlm = folder(tmp_path)
    import_baseline(tmp_workspace, nlm, progress=False)
    before = state(tmp_workspace)
    imports = tmp_workspace.conn.execute("SELECT COUNT(*) FROM imports").fetchone()[0]
    again = import_baseline(tmp_workspace, nlm, progress=False)
    assert all(f.skipped for f in again.files)
    assert state(tmp_workspace) == before
    assert tmp_workspace.conn.execute("SELECT COUNT(*) FROM imports").fetchone()[0] == imports


def clean_state(tmp_path: Path) -> dict[str, object]:
    with Workspace.init(tmp_path / "clean") as ws:
        import_baseline(ws, folder(tmp_path, third=True, name="clean-nlm"), progress=False)
        return state(ws)


def test_a_failure_in_file_2_of_3_rolls_it_back_and_the_rerun_resumes(
        tmp_workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import curation.store.baseline as baseline

    nlm = folder(tmp_path, third=True)
    real = baseline.import_documents
    calls = []

    def failing(run, docs, actor):
        calls.append(docs[0].doc_id)
        if docs[0].doc_id == "95000004":  # the second batch of file 2: the first is committed
            raise OSError(28, "No space left on device")
        return real(run, docs, actor)

    monkeypatch.setattr(baseline, "import_documents", failing)
    with pytest.raises(OSError, match="No space left"):
        import_baseline(tmp_workspace, nlm, progress=False, batch_size=1)
    assert calls[-2:] == ["95000002", "95000004"]
    got = state(tmp_workspace)
    assert got["documents"]["95000002"][0] == "EGFR in lung cancer (first version)."  # undone
    assert sorted(got["documents"]) == ["95000001", "95000002", "95000003", "95000005"]
    rows = BaselineFiles(tmp_workspace).rows()
    assert [(r.name, r.status) for r in rows] == [("pubmed25n0001.xml.gz", "done"),
                                                  ("pubmed25n0002.xml", "failed")]
    assert "No space left on device" in rows[1].error
    monkeypatch.setattr(baseline, "import_documents", real)
    report = import_baseline(tmp_workspace, nlm, progress=False, batch_size=1)
    assert [f.skipped for f in report.files] == [True, False, False]
    assert state(tmp_workspace) == clean_state(tmp_path)


def test_kill_9_in_the_middle_of_file_2_is_rolled_back_and_resumed(tmp_path: Path):
    nlm = folder(tmp_path, third=True)
    root = tmp_path / "ws"
    Workspace.init(root).close()
    script = textwrap.dedent(f"""
        import os, signal
        import curation.store.baseline as baseline
        from curation.store.workspace import Workspace

        real = baseline.read_baseline_file

        def killed(path, **kw):
            for n, item in enumerate(real(path, **kw)):
                if path.name == "pubmed25n0002.xml" and n == 2:
                    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 after two committed batches
                yield item

        baseline.read_baseline_file = killed
        baseline.import_baseline(Workspace.open({str(root)!r}), {str(nlm)!r}, progress=False,
                                 batch_size=1)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with Workspace.open(root) as ws:  # opening rolls the dead import back
        got = state(ws)
        assert sorted(got["documents"]) == ["95000001", "95000002", "95000003", "95000005"]
        assert got["documents"]["95000002"][0] == "EGFR in lung cancer (first version)."
        assert [r[:2] for r in got["ledger"]] == [("pubmed25n0001.xml.gz", "done"),
                                                  ("pubmed25n0002.xml", "running")]
        import_baseline(ws, nlm, progress=False)
        assert state(ws) == clean_state(tmp_path)


def test_a_file_before_one_already_done_is_refused(tmp_workspace, tmp_path: Path):
    nlm = folder(tmp_path)
    aside = tmp_path / "aside"
    shutil.move(nlm / "baseline", aside)
    import_baseline(tmp_workspace, nlm, progress=False)
    shutil.move(aside, nlm / "baseline")
    with pytest.raises(CurationError, match=r"pubmed25n0001.xml.gz comes before "
                                            r"pubmed25n0002.xml, which is already imported"):
        import_baseline(tmp_workspace, nlm, progress=False)


def test_a_damaged_download_fails_before_anything_is_written(tmp_workspace, tmp_path: Path):
    nlm = folder(tmp_path)
    base = nlm / "baseline" / BASE.name
    base.with_name(base.name + ".md5").write_text(f"MD5({base.name})= {'0' * 32}\n")
    with pytest.raises(InputFormatError, match="download it again"):
        import_baseline(tmp_workspace, nlm, progress=False)
    assert Documents(tmp_workspace).counts() == (0, 0)
    assert BaselineFiles(tmp_workspace).rows() == []


def test_a_malformed_file_2_leaves_file_1_imported(tmp_workspace, tmp_path: Path):
    nlm = folder(tmp_path)
    update = nlm / "updatefiles" / UPDATE.name
    update.write_text(update.read_text(encoding="utf-8").replace("</PubmedArticleSet>", ""))
    with pytest.raises(InputFormatError, match="pubmed25n0002.xml.*malformed XML"):
        import_baseline(tmp_workspace, nlm, progress=False)
    rows = BaselineFiles(tmp_workspace).rows()
    assert [(r.name, r.status) for r in rows] == [("pubmed25n0001.xml.gz", "done"),
                                                  ("pubmed25n0002.xml", "failed")]
    assert "malformed XML" in rows[1].error
    assert sorted(Documents(tmp_workspace).ids()) == ["95000001", "95000002", "95000003",
                                                      "95000005"]


def test_the_cli_imports_a_folder_and_reports_each_file(tmp_workspace, tmp_path: Path, capsys):
    root = str(tmp_workspace.root)
    assert main(["import", "docs", "pubmed-baseline", str(folder(tmp_path)), "-w", root,
                 "-q"]) == 0
    out = capsys.readouterr().out
    assert "pubmed25n0001.xml.gz: +4 ~0 =0 -0, md5 ok in" in out
    assert "pubmed25n0002.xml: +1 ~1 =0 -2 in" in out
    assert "2 file(s) imported, 0 already done" in out
    assert main(["import", "docs", "pubmed-baseline", str(tmp_path / "nowhere"), "-w",
                 root]) == 2
    assert "nowhere: not a folder" in capsys.readouterr().err
