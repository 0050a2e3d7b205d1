"""The store's repositories answer the same on SQLite and on PostgreSQL (issue 27, item 1).

Every table is read and written through one class in ``curation/store`` (``Documents``,
``Relations``, ``Labels``, ``Jobs``, ``Models``, ``Entities``, ...). The same repository code runs
on both stores; the PostgreSQL connection translates its statements inside the store
(``store/dialect.py``). Here one scenario of writes runs through the repositories on a SQLite
workspace and on a PostgreSQL one (a throwaway server, tests/pg_server.py: a missing server
fails the run), and every read method must then answer the same on both, and what it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from loop_fixtures import make_loop_workspace

from curation.access.users import Role, User
from curation.store.adjudications import Adjudications
from curation.store.baseline import import_baseline
from curation.store.baseline_files import BaselineFiles
from curation.store.citations import Citations
from curation.store.cross_scores import CrossScores
from curation.store.documents import Documents
from curation.store.entities import Entities
from curation.store.importer import import_citations, import_file
from curation.store.jobs import Jobs, JobStatus
from curation.store.labels import Grade, Labels
from curation.store.mesh import Mesh
from curation.store.models import Models
from curation.store.pubmed_hits import PubmedHits
from curation.store.ranker_versions import RankerVersions
from curation.store.rankers import Rankers, RankingChoice
from curation.store.relations import Relations
from curation.store.settings import Settings
from curation.store.suggestions import Suggestions, SuggestionStatus
from curation.store.watches import RunCounts, Watches
from curation.store.web_sessions import WebSessions
from curation.store.workspace import Workspace
from kb_sources.types import Entity

FIXTURES = Path(__file__).parent / "fixtures"
STORE = Path(__file__).parents[1] / "curation" / "store"
ADMIN = User("root", Role.ADMIN)
#: The repositories: one class per table (or per group of settings), each holding its SQL.
REPOSITORIES = (Adjudications, BaselineFiles, Citations, CrossScores, Documents, Entities, Jobs,
                Labels, Mesh, Models, PubmedHits, RankerVersions, Rankers, Relations, Settings,
                Suggestions, Watches, WebSessions)
RANKER_MANIFEST = {"kind": "logistic", "features": ["bm25_score"], "file": "model.json",
                   "created_by": "root"}
Q = {"schema": "disease_gene", "query_key": "disease=disease:melanoma",
     "query_text": "Genes of melanoma?"}


def scenario(ws: Workspace, model_dir: Path) -> None:
    """The same writes on any store, each through its repository."""
    make_loop_workspace(ws)
    import_file(ws, "docs", "pubtator", FIXTURES / "pubtator_sample.txt", progress=False)
    import_citations(ws, FIXTURES / "citations_sample.tsv", progress=False)
    Citations(ws).insert([("101", "102"), ("101", "103")], reader="test", path="edges",
                         actor="ann")
    entities = Entities(ws)
    entities.add_curator_synonym("gene:braf", "B-Raf", "ann")
    entities.add_synonyms(Entity("Melanoma", "disease", "D008545"), ["Melanomas"], "mesh")
    CrossScores(ws).put_many("disease_gene-cross@1:abc", Q["query_text"],
                             {"101": 2.5, "201": -1.0, "missing": 3.0})
    CrossScores(ws).put_many("disease_gene-cross@1:abc", Q["query_text"], {"201": -0.5})
    labels = Labels(ws)
    labels.record(user="ann", doc_id="101", grade="complete", **Q)
    labels.record(user="ann", doc_id="201", grade="irrelevant", **Q)
    labels.record(user="ann", doc_id="201", grade="partial", note="relabel", **Q)
    labels.record(user="bob", doc_id="101", grade="irrelevant", **Q)
    labels.record(user="bob", doc_id="301", grade="complete", **Q)
    labels.undo_last("bob")
    Adjudications(ws).insert(user="root", schema=Q["schema"], query_key=Q["query_key"],
                             doc_id="101", grade=Grade.COMPLETE, reason="the abstract says so")
    jobs = Jobs(ws)
    first = jobs.insert("train", {"schema": "disease_gene"}, "root")
    second = jobs.insert("index", {"schema": "disease_gene"}, "root")
    assert jobs.claim(first, pid=4242)
    jobs.record_progress(first, 0.5, "half way")
    jobs.set_final_status(first, JobStatus.DONE, result={"ndcg@10": 0.7},
                          was=(JobStatus.RUNNING,))
    jobs.fail_queued(second, "stopped by the test")
    models = Models(ws)
    version = models.register(schema="disease_gene", recipe="edel", base_model="tiny",
                              model_dir=model_dir, manifest={"epochs": 1},
                              metrics={"ndcg@10": 0.5}, created_by="root")
    models.activate(version.id, ADMIN, reason="first")
    models.update_metrics(version.id, {"recall@100": 0.9}, "root")
    stored = RankerVersions(ws)
    ident = stored.allocate("disease_gene", created_by="root", tmp=".tmp-a")
    stored.finish(ident, file="model.json", sha256="ab" * 32, manifest=RANKER_MANIFEST)
    stored.set_manifest(ident, {**RANKER_MANIFEST, "metrics": {"dev": {"ndcg@10": 0.5}}},
                        actor="root")
    stored.mark_checked(ident, "ab" * 32)
    stored.allocate("disease_gene", created_by="root", tmp=".tmp-b", floor=3)  # still saving
    rankers = Rankers(ws)
    rankers.set_retrain_every(7, user=ADMIN)
    rankers.set_active("disease_gene", ident, user=ADMIN)
    assert not rankers.set_active("disease_gene", None, user=ADMIN, expected="x-ranker@9")
    rankers.beat_round(rankers.begin_round("disease_gene", started_by="root"))
    rankers.set_default_ranking("disease_gene", RankingChoice(
        best="bm25+rerank", scores={"bm25": 0.61, "bm25+rerank": 0.66}, queries=3, seed=13,
        notes=("ranked: no active ranker version",), by="root"), user=ADMIN)
    with ws.transaction():
        Settings(ws).put("vectors.store", "faiss")
    PubmedHits(ws).record(actor="ann", schema=Q["schema"], query_key=Q["query_key"],
                          pubmed_query='"melanoma"[tiab]', hit_count=812,
                          pmids=["102", "99000001", "101"], fetched=2, imported=["99000001"],
                          at="2026-02-01T10:00:00+00:00")
    suggestions = Suggestions(ws)
    with ws.transaction():
        kept = suggestions.insert("2026-01-01T00:00:00+00:00", "ann", "disease_gene",
                                  Q["query_key"], "101", {"disease": "melanoma"},
                                  answer="BRAF", answer_key="gene:braf", comment="")
        suggestions.insert("2026-01-02T00:00:00+00:00", "ann", "disease_gene", Q["query_key"],
                           "103", {"disease": "melanoma"}, answer="NRAS",
                           answer_key="gene:nras", comment="")
        suggestions.set_review(kept, SuggestionStatus.ACCEPTED, "root",
                               "2026-01-03T00:00:00+00:00", "right")
    # NLM's files: a revision, an older version left out, deletions (issue 37)
    import_baseline(ws, FIXTURES / "pubmed_baseline", progress=False)
    watch_scenario(ws)


def watch_scenario(ws: Workspace) -> None:
    """A relation watch with a done and a failed run; a filter watch added and removed."""
    watches = Watches(ws)
    common = {"schema": Q["schema"], "max_hits": 200, "every_days": 1, "mindate": "2026-01-01",
              "at": "2026-01-01T00:00:00+00:00"}
    first = watches.add(owner="ann", kind="relation", target=Q["query_key"],
                        spec={"slots": {"disease": "melanoma"}}, label="melanoma",
                        pubmed_query='"melanoma"[tiab]', **common)
    gone = watches.add(owner="bob", kind="filter", target='{"filters": {"disease": "mel"}}',
                       spec={"filters": {"disease": "mel"}}, label="disease_gene where "
                       "disease=mel", pubmed_query="", **common)
    watches.record_run(first, RunCounts('"melanoma"[tiab]', "2026-01-01", "2026-02-01", 1, 3, 2,
                                        1), actor="ann", started_at="2026-02-01T09:00:00+00:00",
                       finished_at="2026-02-01T10:00:00+00:00",
                       hits=[(Q["query_key"], "102", None, None),
                             (Q["query_key"], "99000001", 2.5, 1)])
    watches.record_run(first, RunCounts('"melanoma"[tiab]', "2026-02-01", "2026-02-02",
                                        error="E-utilities down"), actor="cli",
                       started_at="2026-02-02T09:00:00+00:00",
                       finished_at="2026-02-02T09:01:00+00:00",
                       hits=[(Q["query_key"], "102", 9.0, 1)])  # found before: kept first
    watches.record_run(gone, RunCounts("q", "2026-01-01", "2026-02-01"), actor="bob",
                       started_at="2026-02-01T09:00:00+00:00",
                       finished_at="2026-02-01T09:00:00+00:00", hits=[("k", "101", 1.0, 1)])
    assert watches.remove(gone) and not watches.remove(gone)


def reads(ws: Workspace) -> dict[str, object]:
    """Every read method of every repository, with values that do not depend on the clock."""
    docs, rels, labels = Documents(ws), Relations(ws), Labels(ws)
    entities, jobs, models = Entities(ws), Jobs(ws), Models(ws)
    key = Q["query_key"]
    return {
        "documents.ids": sorted(docs.ids()),
        "documents.counts": docs.counts(),
        "documents.parts": docs.parts(["101", "99000001", "missing"]),
        "documents.all_parts": docs.all_parts(by_id=True)[:3],
        "documents.texts": docs.texts(["102", "301"]),
        "documents.rows_by_id": {k: (r.title, r.year) for k, r in docs.rows_by_id(["101"]).items()},
        "documents.corpus_hashes": docs.corpus_hashes()[:2],
        "documents.annotation_types": docs.annotation_types()[:5],
        "documents.annotation_rows": docs.annotation_rows(["99000001"], ["GeneOrGeneProduct"]),
        "relations.schemas": rels.schemas(),
        "relations.partial": [(p.query_key, p.pmids) for p in rels.partial("disease_gene")][:4],
        "relations.attributes": rels.attributes("disease_gene"),
        "relations.sources": rels.sources("disease_gene"),
        "relations.rows": rels.rows("disease_gene")[:3],
        "relations.evaluable_schemas": rels.evaluable_schemas(),
        "labels.find": [(x.user, x.doc_id, x.grade.value, x.note)
                        for x in labels.find(include_superseded=True)],
        "labels.current": labels.current("ann", Q["schema"], key, "201").grade.value,
        "labels.grades": labels.grades(Q["schema"], key, "ann"),
        "labels.agreement": agreement(labels),
        "labels.counts": labels.counts(Q["schema"], None),
        "labels.labellers": labels.labellers(Q["schema"], [key]),
        "labels.users": labels.users(),
        "entities.synonyms": entities.synonyms("gene:braf"),
        "entities.get": entities.get("disease:D008545").synonyms,
        "entities.exists": (entities.exists("gene:braf"), entities.exists("gene:nope")),
        "entities.of_type": entities.of_type("gene", ("disease_gene", "gene"))[:3],
        "entities.answer_slot": [e.key for e in entities.answer_slot_entities("disease_gene",
                                                                              "gene")][:4],
        "citations.edges": sorted(Citations(ws).edges())[:4],
        "citations.cited_by_query": {k: sorted(v) for k, v in
                                     Citations(ws).cited_by_query("disease_gene").items()
                                     if k == key},
        "adjudications": [(a.doc_id, a.grade.value, a.reason)
                          for a in Adjudications(ws).current_list()],
        "adjudications.graded_items": sorted(Adjudications(ws).graded_items("ann")),
        "jobs": [(j.kind, j.status.value, j.progress, j.result, j.error)
                 for j in (jobs.load(i) for i in jobs.ids(None, 10))],
        "jobs.unclaimed_ids": jobs.unclaimed_ids(),
        "models": [(m.id, m.status.value, m.metrics) for m in models.versions()],
        "models.active": models.active("disease_gene").id,
        "labels.model_versions": labels.model_versions(),
        "rankers": (Rankers(ws).retrain_every(), Rankers(ws).active("disease_gene"),
                    Rankers(ws).default_ranking("disease_gene")),
        "rankers.labels_waiting": Rankers(ws).labels_waiting("disease_gene"),
        "rankers.running_round": (lambda r: (r.started_by, r.started_from) if r else None)(
            Rankers(ws).running_round("disease_gene")),
        "rankerversions": [(r.ident, r.number, r.status, r.file, r.checked, r.manifest)
                           for r in RankerVersions(ws).saved()],
        "rankerversions.saving": [(r.ident, r.tmp, r.writer_alive)
                                  for r in RankerVersions(ws).saving()],
        "rankerversions.exists": (RankerVersions(ws).exists("disease_gene-ranker@1"),
                                  RankerVersions(ws).exists("disease_gene-ranker@4"),
                                  sorted(RankerVersions(ws).idents())),
        "settings.value": Settings(ws).value("vectors.store"),
        "crossscores.get_many": CrossScores(ws).get_many("disease_gene-cross@1:abc",
                                                         Q["query_text"], ["101", "201", "301"]),
        "crossscores.scored": (CrossScores(ws).scored_texts("disease_gene-cross@1:abc",
                                                            [Q["query_text"], "other"]),
                               CrossScores(ws).count(),
                               CrossScores(ws).active_version("disease_gene")),
        "pubmedhits.searches": [(p.actor, p.pubmed_query, p.hit_count, p.fetched, p.imported)
                                for p in PubmedHits(ws).searches(Q["schema"], Q["query_key"])],
        "pubmedhits.hits": PubmedHits(ws).hits(PubmedHits(ws).searches()[0].id),
        "pubmedhits.fetch_dates": PubmedHits(ws).fetch_dates(["101", "99000001", "missing"]),
        "suggestions": [(s.pmid, s.answer, s.status.value) for s in Suggestions(ws).stored()],
        "suggestions.pending_answers": Suggestions(ws).pending_answers("disease_gene"),
        "suggestions.accepted": Suggestions(ws).accepted_answer_rows("disease_gene", key),
        "mesh.headings": Mesh(ws).headings(),
        "websessions.find": WebSessions(ws).find("no-such-session"),
        "baselinefiles.rows": [(r.name, r.status, r.added, r.updated, r.deleted, r.kept,
                                r.md5_checked) for r in BaselineFiles(ws).rows()],
        "baselinefiles.deletions": BaselineFiles(ws).deletions(),
        "baselinefiles.versions": BaselineFiles(ws).versions(),
        **watch_reads(ws),
    }


def watch_reads(ws: Workspace) -> dict[str, object]:
    watches = Watches(ws)
    return {
        "watches.watches": [(w.id, w.owner, w.kind, w.target, w.spec, w.mindate, w.last_run_at)
                            for w in watches.watches()],
        "watches.get": (watches.get(1).label, watches.get(2)),
        "watches.find": (watches.find("ann", Q["schema"], Q["query_key"]).id,
                         watches.find("bob", Q["schema"], Q["query_key"])),
        "watches.of_relation": [w.id for w in watches.of_relation(Q["schema"], Q["query_key"])],
        "watches.runs": [(r.status, r.actor, r.mindate, r.maxdate, r.found, r.fetched,
                          r.imported, r.new_pmids, r.best_score, r.error)
                         for r in watches.runs(1)],
        "watches.last_runs": {k: r.status for k, r in watches.last_runs([1, 2]).items()},
        "watches.known": sorted(watches.known(1)),
        "watches.hits": [(h.pmid, h.since, h.score, h.rank)
                         for h in watches.hits(schema=Q["schema"], query_key=Q["query_key"])],
    }


def agreement(labels: Labels) -> tuple[int, float, float]:
    found = labels.agreement("ann", "bob")
    return found.shared, found.observed, found.kappa


@pytest.fixture
def both(tmp_path: Path, pg_url: str, fake_model_dir: Path) -> dict[str, dict[str, object]]:
    """The reads after the scenario, on SQLite and on PostgreSQL."""
    out = {}
    for engine, url in (("sqlite", None), ("postgresql", pg_url)):
        with Workspace.init(tmp_path / engine, store_url=url) as ws:
            assert ws.engine == engine
            scenario(ws, fake_model_dir)
            out[engine] = reads(ws)
    return out


def test_every_repository_answers_the_same_on_sqlite_and_postgresql(both):
    sqlite, postgres = both["sqlite"], both["postgresql"]
    assert list(sqlite) == list(postgres)
    different = {k: (sqlite[k], postgres[k]) for k in sqlite if sqlite[k] != postgres[k]}
    assert different == {}


def test_the_repositories_answer_what_the_scenario_wrote(both):
    got = both["sqlite"]
    assert got["documents.parts"]["101"] == ("BRAF in melanoma",
                                            "Mutations of BRAF cause melanoma in many families.")
    assert "missing" not in got["documents.parts"]
    assert got["relations.schemas"] == ["disease_gene"]
    # newest first; bob's label of 301 was undone; ann's relabel superseded her grade of 201
    assert got["labels.find"] == [("bob", "101", "irrelevant", ""),
                                  ("ann", "201", "partial", "relabel"),
                                  ("ann", "201", "irrelevant", ""),
                                  ("ann", "101", "complete", "")]
    assert got["labels.grades"] == {"101": Grade.COMPLETE, "201": Grade.PARTIAL}
    assert got["labels.agreement"] == (1, 0.0, 0.0)  # one shared item, graded differently
    assert got["labels.labellers"] == [(Q["query_key"], "101", "ann"),
                                       (Q["query_key"], "101", "bob"),
                                       (Q["query_key"], "201", "ann")]
    assert got["labels.model_versions"] == [""]
    assert got["rankers.labels_waiting"] == 4
    assert got["labels.current"] == "partial"
    assert got["labels.users"] == ["ann", "bob"]
    assert "B-Raf" in got["entities.synonyms"]
    assert got["entities.get"] == ("Melanomas",)
    assert got["entities.exists"] == (True, False)
    assert got["adjudications"] == [("101", "complete", "the abstract says so")]
    assert got["jobs"] == [("index", "failed", 0.0, {}, "stopped by the test"),
                           ("train", "done", 1.0, {"ndcg@10": 0.7}, "")]
    assert got["jobs.unclaimed_ids"] == []
    assert got["models"] == [("disease_gene-edel@1", "active",
                              {"ndcg@10": 0.5, "recall@100": 0.9})]
    assert got["rankers"] == (7, "disease_gene-ranker@1", RankingChoice(
        best="bm25+rerank", scores={"bm25": 0.61, "bm25+rerank": 0.66}, queries=3, seed=13,
        notes=("ranked: no active ranker version",), by="root"))
    assert got["rankers.running_round"] == ("root", "disease_gene-ranker@1")
    assert [r[:5] for r in got["rankerversions"]] == [("disease_gene-ranker@1", 1, "saved",
                                                       "model.json", True)]
    assert '"metrics": {"dev": {"ndcg@10": 0.5}}' in got["rankerversions"][0][5]
    assert got["rankerversions.saving"] == [("disease_gene-ranker@4", ".tmp-b", True)]
    assert got["rankerversions.exists"] == (True, False, ["disease_gene-ranker@1",
                                                          "disease_gene-ranker@4"])
    assert got["settings.value"] == "faiss"
    assert got["crossscores.get_many"] == {"101": 2.5, "201": -0.5}
    assert got["crossscores.scored"] == (1, 2, None)
    assert got["suggestions.pending_answers"] == [(Q["query_key"], "gene:nras", "NRAS")]
    assert got["suggestions.accepted"] == [("BRAF", "gene:braf")]
    assert got["suggestions"] == [("103", "NRAS", "new"), ("101", "BRAF", "accepted")]
    assert got["relations.partial"][0] == ("disease=disease:breast cancer", ("106", "107"))
    assert got["documents.texts"] == [
        "NRAS in melanoma Mutations of NRAS cause melanoma in many families.",
        "Cohort study 1 Participants in cohort 1 reported diet and sleep."]
    assert got["websessions.find"] is None
    assert got["baselinefiles.rows"] == [("pubmed25n0001.xml.gz", "done", 4, 0, 0, 0, True),
                                         ("pubmed25n0002.xml", "done", 1, 1, 2, 0, False)]
    assert [p for p, _, _ in got["baselinefiles.deletions"]] == ["95000001", "95000003",
                                                                 "95999999"]
    assert got["baselinefiles.versions"] == {"95000005": 2}
    assert got["pubmedhits.searches"] == [("ann", '"melanoma"[tiab]', 812, 2, 1)]
    assert got["pubmedhits.hits"] == [("102", 1, None),
                                      ("99000001", 2, "2026-02-01T10:00:00+00:00"),
                                      ("101", 3, None)]
    assert got["pubmedhits.fetch_dates"] == {"99000001": "2026-02-01T10:00:00+00:00"}
    # the failed run left the date; the PMID found before kept its first run and score
    assert got["watches.watches"] == [(1, "ann", "relation", Q["query_key"],
                                       {"slots": {"disease": "melanoma"}}, "2026-02-01",
                                       "2026-02-01T10:00:00+00:00")]
    assert got["watches.get"] == ("melanoma", None)
    assert got["watches.find"] == (1, None) and got["watches.of_relation"] == [1]
    assert got["watches.runs"] == [
        ("failed", "cli", "2026-02-01", "2026-02-02", 0, 0, 0, 1, 9.0, "E-utilities down"),
        ("done", "ann", "2026-01-01", "2026-02-01", 3, 2, 1, 2, 2.5, "")]
    assert got["watches.last_runs"] == {1: "failed"}
    assert got["watches.known"] == [(Q["query_key"], "102"), (Q["query_key"], "99000001")]
    assert got["watches.hits"] == [("99000001", "2026-01-01", 2.5, 1),
                                   ("102", "2026-01-01", None, None)]


def test_the_repository_modules_hold_classes_not_loose_database_functions():
    """No public module-level function of the store takes the workspace as its first argument:
    reads and writes of a table are methods of its repository class."""
    loose = []
    for path in sorted(STORE.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
                    and node.args.args and node.args.args[0].arg == "ws"):
                loose.append(f"{path.name}:{node.name}")
    assert set(loose) <= SERVICES, sorted(set(loose) - SERVICES)
    assert "importer.py:import_file" in loose  # the scan sees the store's functions


#: Operations over several tables (imports, migrations, copies): functions, not repositories.
SERVICES = frozenset({
    "importer.py:import_file", "importer.py:import_items", "importer.py:import_mesh_tree",
    "importer.py:import_citations", "importer.py:insert_pairs", "importer.py:import_mesh_headings",
    "import_log.py:begin_import", "import_log.py:importing", "import_log.py:rollback_import",
    "import_log.py:recover_unfinished_imports", "import_log.py:recover_on_open",
    "import_rows.py:add_entity", "index_models.py:check_index_models",
    "baseline.py:import_baseline",
    "transfer.py:migrate_to_postgresql", "transfer.py:clone_database",
})


def test_every_repository_class_is_read_on_both_stores(both):
    """Each class of ``curation/store`` built on a workspace is in :data:`REPOSITORIES` and has
    reads in the two-store comparison, so a new repository cannot skip PostgreSQL."""
    found = set()
    for path in sorted(STORE.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            init = next((f for f in getattr(node, "body", ()) if isinstance(f, ast.FunctionDef)
                         and f.name == "__init__"), None)
            if (isinstance(node, ast.ClassDef) and init is not None
                    and [a.arg for a in init.args.args] == ["self", "ws"]):
                found.add(node.name)
    assert found == {cls.__name__ for cls in REPOSITORIES}
    read = {key.split(".")[0] for key in both["sqlite"]}
    assert read == {cls.__name__.lower() for cls in REPOSITORIES}
