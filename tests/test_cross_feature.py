"""Issue 45 part B: the cross-encoder's score as a learned-ranker feature, cached in the workspace
and computed by a background job; a missing score is a missing feature, never an error.

Mechanics run on the tiny random cross-encoder (``tiny_cross_encoder``); where a test needs a
cross-encoder that knows the answer (so the ranker learns a weight for it), the cache is filled
through the same job code with a scoring function that reads the KB's citations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from curation.access.users import Role, User
from curation.evaluation.harness import build_task
from curation.jobs.queue import list_jobs, run_job
from curation.ranking.cross import (
    CrossFeature,
    cross_columns,
    cross_top,
    open_cross,
    set_workspace_k,
    version_cross,
    workspace_k,
)
from curation.ranking.explain import reasons
from curation.ranking.features import CROSS, feature_names, gather
from curation.ranking.model import RankerOptions
from curation.ranking.pipeline import RankingContext
from curation.ranking.versions import get_version
from curation.search.cross_scores import (
    CROSS_JOB,
    after_cross_activation,
    cross_for_round,
    on_relation_opened,
    queue_schema_scores,
    request_relation_scores,
    score_relations,
)
from curation.search.indexing import get_index
from curation.search.ranked import open_ranked
from curation.store.cross_scores import ACTIVE_KEY, CrossScores, model_key
from curation.store.importer import import_items
from curation.store.models import Models
from curation.store.settings import Settings
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from kb_sources.types import Document, Entity
from retrievers.base import Hit
from retrievers.cross import CrossScorer
from tests.ranker_fixtures import make_learnable_workspace

ADMIN = User("admin", Role.ADMIN)
CURATOR = User("cara", Role.CURATOR)
SMALL = RankerOptions(n_estimators=30, min_child_samples=1)


def add_cross_version(ws, folder, schema: str = "disease_gene", *, activate: bool = True) -> str:
    """Register the tiny cross-encoder as ``<schema>-cross@N`` (and make it the active one)."""
    version = Models(ws).register(schema=schema, recipe="cross", base_model="tiny-bert",
                                  model_dir=folder, manifest={"kind": "cross",
                                                              "max_length": 256},
                                  created_by="admin")
    if activate:  # the setting alone: the tests below queue their own jobs
        Settings(ws).put(ACTIVE_KEY.format(schema=schema), version.id)
    return version.id


def test_activating_a_cross_version_queues_its_schema_scores(tmp_workspace, tiny_cross_encoder):
    from curation.training.cross_versions import activate_cross

    ws = make_learnable_workspace(tmp_workspace, n=6)
    ident = add_cross_version(ws, tiny_cross_encoder, activate=False)
    assert not list_jobs(ws, CROSS_JOB)
    activate_cross(ws, ident, user=ADMIN, reason="test", start_scoring=False)
    assert Settings(ws).value(ACTIVE_KEY.format(schema="disease_gene")) == ident
    [job] = list_jobs(ws, CROSS_JOB)
    assert job.params == {"schema": "disease_gene", "version": ident, "k": 50}
    activate_cross(ws, ident, user=ADMIN, reason="again", start_scoring=False)  # already active
    assert len(list_jobs(ws, CROSS_JOB)) == 1


def knows_the_kb(ws, schema: str = "disease_gene"):
    """A scoring function that gives the KB's cited abstracts 4.0 and every other one -4.0 (a
    cross-encoder that has learned the task), by the text it reads."""
    task = build_task(ws, schema)
    cited = {q.text: set(q.gold) for q in task.queries}
    from curation.store.documents import Documents
    from kb_sources.types import joined_text

    texts = {joined_text(t, a): d for d, t, a in Documents(ws).all_parts()}

    def score(query, documents):
        return np.asarray([4.0 if texts.get(doc) in cited.get(query, ()) else -4.0
                           for doc in documents], dtype=np.float32)
    return score


# -- the cache ------------------------------------------------------------------------------------
def test_the_cache_round_trips_and_forgets_a_changed_abstract(tmp_workspace):
    ws = make_learnable_workspace(tmp_workspace, n=4)
    store = CrossScores(ws)
    assert store.put_many("m@1:abc", "Genes of  Bako disease?", {"1000": 2.5, "2000": -1.0,
                                                               "no-such-doc": 9.0}) == 2
    # the text's whitespace is folded; another model or text reads nothing
    assert store.get_many("m@1:abc", "Genes of Bako disease?", ["1000", "2000", "2001"]) == {
        "1000": 2.5, "2000": -1.0}
    assert store.get_many("m@2:abc", "Genes of Bako disease?", ["1000"]) == {}
    assert store.get_many("m@1:abc", "Genes of Kobo disease?", ["1000"]) == {}
    assert store.missing("m@1:abc", "Genes of Bako disease?", ["2001", "1000", "2002"]) == [
        "2001", "2002"]
    assert store.scored_texts("m@1:abc", ["Genes of Bako disease?", "other"]) == 1
    store.put_many("m@1:abc", "Genes of Bako disease?", {"1000": 3.0})  # replaced, not doubled
    assert store.get_many("m@1:abc", "Genes of Bako disease?", ["1000"]) == {"1000": 3.0}
    assert store.count("m@1:abc") == 2
    assert store.scored_docs("m@1:abc", "Genes of Bako  disease?") == {"1000": 3.0,
                                                                      "2000": -1.0}
    assert store.scored_docs("m@2:abc", "Genes of Bako disease?") == {}
    # a changed abstract is read again: its old score no longer counts
    import_items(ws, [Document("1000", "BRAF variants", "A new abstract text.",
                               source="handmade")], reader="test", path="again", progress=False)
    assert store.get_many("m@1:abc", "Genes of Bako disease?", ["1000", "2000"]) == {
        "2000": -1.0}
    assert store.scored_docs("m@1:abc", "Genes of Bako disease?") == {"2000": -1.0}
    with pytest.raises(CurationError, match="finite numbers; 1 are not .*nothing was stored"):
        store.put_many("m@1:abc", "q", {"2000": 1.0, "2001": math.nan})
    assert store.get_many("m@1:abc", "q", ["2000"]) == {}


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_cache_speaks_both_engines(engine, tmp_path, request):
    from curation.store.workspace import Workspace

    url = request.getfixturevalue("pg_url") if engine == "postgresql" else None
    with Workspace.init(tmp_path / "ws", store_url=url) as ws:
        make_learnable_workspace(ws, n=2)
        store = CrossScores(ws)
        assert store.put_many("m", "q", {"1000": 1.0, "2000": 2.0}) == 2
        assert store.put_many("m", "q", {"1000": 1.5}) == 1  # an upsert on both engines
        assert store.get_many("m", "q", ["1000", "2000", "2001"]) == {"1000": 1.5, "2000": 2.0}
        assert store.scored_texts("m", ["q", "r"]) == 1 and store.count() == 2


# -- a missing score is a missing feature ---------------------------------------------------------
def test_a_missing_score_is_a_missing_feature_never_an_error(tmp_workspace, tiny_cross_encoder):
    ws = make_learnable_workspace(tmp_workspace, n=4)
    schema = get_schema("disease_gene", ws.schemas())
    bm25 = get_index(ws, "bm25", progress=False)
    query = {"disease": (Entity("Bakox disease", "disease"),)}
    text = "Genes associated with Bakox disease?"
    # no active cross version: nothing to read, queue or train with
    assert CrossScores(ws).active_version("disease_gene") is None
    assert request_relation_scores(ws, "disease_gene", "k", text, user=CURATOR) is None
    assert cross_for_round(ws, "disease_gene", [text]) is None
    for block in (CrossFeature("disease_gene-cross@9", "disease_gene-cross@9:0"),
                  CrossFeature("", "")):  # nothing cached yet / the version is gone
        ctx = RankingContext(ws, schema, bm25, cross=block)
        cands = ctx.candidates(text)
        x = ctx.features(query, cands)
        cols = [ctx.names.index(n) for n in CROSS]
        assert x.shape == (len(cands.doc_ids), len(feature_names(("disease",), cross=True)))
        assert np.isnan(x[:, cols[0]]).all() and np.isnan(x[:, cols[1]]).all()
        assert (x[:, cols[2]] == 1.0).all()
    # scores for part of the top K: the others stay missing
    cands = gather([Hit("a", 3.0, 1), Hit("b", 2.0, 2), Hit("c", 1.0, 3)], extra=["z"])
    assert cross_top(cands, 2) == ["a", "b"] and cross_top(cands, 9) == ["a", "b", "c"]
    cols = cross_columns(cands.doc_ids, {"b": 1.5, "a": -0.5})
    assert cols[:2].tolist() == [[-0.5, 1.0, 0.0], [1.5, 0.5, 0.0]]
    assert np.isnan(cols[2:, :2]).all() and cols[2:, 2].tolist() == [1.0, 1.0]
    with pytest.raises(CurationError, match="must be a whole number >= 1, e.g. 50; got 0"):
        cross_top(cands, 0)


# -- the job --------------------------------------------------------------------------------------
def test_the_job_fills_the_cache_and_skips_cached_pairs(tmp_workspace, tiny_cross_encoder):
    ws = make_learnable_workspace(tmp_workspace, n=6)
    ident = add_cross_version(ws, tiny_cross_encoder)
    key = model_key(Models(ws).get(ident))
    job = queue_schema_scores(ws, "disease_gene", k=3, start=False)
    assert job.params == {"schema": "disease_gene", "version": ident, "k": 3}
    done = run_job(ws, job.id)
    assert done.status.value == "done", done.error
    assert done.result["relations"] == 6 and done.result["scored"] == 18
    assert done.result["cached"] == 0 and "scored 6 of 6 relations" in done.message
    assert CrossScores(ws).count(key) == 18
    # the cached scores are the cross-encoder's own logits of title + abstract
    task = build_task(ws, "disease_gene")
    q = task.queries[0]
    ctx = RankingContext(ws, get_schema("disease_gene", ws.schemas()),
                         get_index(ws, "bm25", progress=False), cross=open_cross(ws, ident, k=3))
    top = cross_top(ctx.candidates(q.text), 3)
    cached = CrossScores(ws).get_many(key, q.text, top)
    from curation.store.documents import Documents
    from kb_sources.types import joined_text

    parts = Documents(ws).parts(top)
    direct = CrossScorer.load(tiny_cross_encoder, device="cpu").score(  # the job's precision
        q.text, [joined_text(*parts[d]) for d in top])
    assert np.allclose([cached[d] for d in top], direct, rtol=0.02, atol=1e-4)
    # a second run reads nothing again
    again = run_job(ws, queue_schema_scores(ws, "disease_gene", k=3, start=False).id)
    assert again.result["scored"] == 0 and again.result["cached"] == 18
    # a deeper K scores only the new pairs
    deeper = score_relations(ws, "disease_gene", k=4)
    assert deeper.cached == 18 and deeper.scored == 6
    # opening a relation whose (edited) text has no score queues a small job for it alone
    opened = request_relation_scores(ws, "disease_gene", q.qid, "Which genes cause Bakox?",
                                     user=CURATOR, start=False)
    assert opened.params["query_keys"] == [q.qid] and opened.created_by == "cara"
    ran = run_job(ws, opened.id).result
    assert ran["relations"] == 1 and ran["scored"] > 0 and ran["cached"] == 0
    assert CrossScores(ws).scored_texts(key, ["Which genes cause Bakox?"]) == 1
    assert request_relation_scores(ws, "disease_gene", q.qid, "Which genes cause Bakox?",
                                   user=CURATOR, start=False) is None
    # bad parameters are refused at submission, naming the fix
    from curation.jobs.queue import submit_job

    with pytest.raises(CurationError, match="not a cross-encoder version of disease_gene"):
        submit_job(ws, CROSS_JOB, {"schema": "disease_gene",
                                   "version": _edel_version(ws, tiny_cross_encoder)},
                   user=CURATOR, start=False)
    with pytest.raises(CurationError, match="'text' must be a non-empty query text, given "
                       "with exactly one relation key"):
        submit_job(ws, CROSS_JOB, {"schema": "disease_gene", "text": "x"}, user=CURATOR,
                   start=False)
    assert [j.params.get("query_keys") for j in list_jobs(ws, CROSS_JOB)] == [
        [q.qid], None, None]
    # activating a cross version queues its schema's job; the page's hook never raises
    assert after_cross_activation(ws, ident, start=False).params["version"] == ident
    assert after_cross_activation(ws, _edel_version(ws, tiny_cross_encoder)) is None
    assert on_relation_opened(ws, "disease_gene", q.qid, "x", user=None) is None
    assert on_relation_opened(ws, "disease_gene", q.qid, "Genes?", user=CURATOR,
                              cross=CrossFeature("disease_gene-edel@1", "k")) is None


def _edel_version(ws, folder) -> str:
    return Models(ws).register(schema="disease_gene", recipe="edel", base_model="tiny",
                               model_dir=folder, manifest={}, created_by="admin").id


# -- the ranker learns it, explains it, and old versions keep working ---------------------------
def test_a_ranker_trained_with_the_feature_records_it_and_explains_it(tmp_workspace,
                                                                       tiny_cross_encoder):
    from curation.training.ranker import train_ranker

    ws = make_learnable_workspace(tmp_workspace, n=30)
    old = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL,
                       gate=False).version  # before any cross version: no cross features
    assert not set(CROSS) & set(old.manifest["features"]) and old.manifest["cross"] is None
    ident = add_cross_version(ws, tiny_cross_encoder)
    # too few train queries scored yet: the round trains without the cross block
    assert cross_for_round(ws, "disease_gene", [q.text for q in build_task(
        ws, "disease_gene").split("train")]) is None
    assert set_workspace_k(ws, 10) == 10 and workspace_k(ws) == 10
    run = score_relations(ws, "disease_gene", score=knows_the_kb(ws))
    assert run.version == ident and run.relations == 30 and run.scored > 0
    new = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL,
                       gate=False).version
    assert new.id != old.id and list(new.manifest["features"][6:9]) == list(CROSS)
    assert new.manifest["cross"] == {"version": ident, "key": model_key(Models(ws).get(ident)),
                                     "k": 10}
    # the page: the version's context reads the cache only, and "why this rank" names it
    schema = get_schema("disease_gene", ws.schemas())
    ranked = open_ranked(ws, schema, get_version(ws, new.id), get_index(ws, "bm25",
                                                                         progress=False))
    assert ranked.context.cross.version == ident and ranked.context.cross.score is None
    q = build_task(ws, "disease_gene").queries[0]
    hits, why = ranked.search(ws, q.text, q.query, 5, q.qid)
    assert hits[0].doc_id in q.gold
    assert any(r.startswith("the cross-encoder read the query and abstract together: score "
                            "4.00, in the top ") for r in why[hits[0].doc_id]), why
    # the version whose cross version is gone still ranks: its cross features are missing
    Models(ws).retire(ident, ADMIN)
    assert version_cross(ws, new.manifest).version == ident  # retired, still registered
    gone = version_cross(ws, {**new.manifest, "cross": {"version": "disease_gene-cross@9",
                                                        "key": "x", "k": 10}})
    assert gone.version == "" and gone.key == ""
    # an old version (no cross feature) keeps loading and scoring beside the cross cache
    before = open_ranked(ws, schema, get_version(ws, old.id), get_index(ws, "bm25",
                                                                         progress=False))
    assert before.context.cross is None and list(before.context.names) == list(
        old.manifest["features"])
    old_hits, old_why = before.search(ws, q.text, q.query, 5, q.qid)
    assert len(old_hits) == 5 and not any("cross-encoder" in r for rs in old_why.values()
                                          for r in rs)


def test_why_this_rank_phrases_the_cross_encoder():
    names = ["bm25_rank", *CROSS]
    values = np.asarray([3.0, 2.31, 0.04, 0.0])
    found = reasons(names, values, np.asarray([0.1, 1.2, 0.8, 0.0]), {}, "gene")
    assert [r.text for r in found] == [
        "the cross-encoder read the query and abstract together: score 2.31, in the top 4%",
        "ranks high on word overlap (BM25)"]
    missing = reasons(names, np.asarray([3.0, math.nan, math.nan, 1.0]),
                      np.asarray([0.0, 0.0, 0.0, 0.5]), {}, "gene")
    assert [r.text for r in missing] == [
        "the cross-encoder has not read it (not among its top candidates)"]


def test_held_out_queries_whose_labels_a_feature_version_learned_are_not_measured(
        tmp_workspace, tiny_cross_encoder):
    """A cross (or dense) version trained on curators' labels of a dev or test relation would
    score what it learned there: the ranker round leaves those queries' groups out of its
    held-out pool, as the dense gate does, and says so; so does choosing the default."""
    from curation.evaluation.best import unlearned_task
    from curation.ranking.versions import active_version
    from curation.training.ranker import promote_ranker, train_ranker

    ws = make_learnable_workspace(tmp_workspace, n=30)
    task = build_task(ws, "disease_gene")
    dev, test = task.split("dev")[0], task.split("test")[0]
    learned = sorted({dev.group, test.group})
    pool = {q.qid for q in task.queries if q.split != "train"}
    set_workspace_k(ws, 10)
    # a cross version that learned no label leaves the pool whole
    add_cross_version(ws, tiny_cross_encoder)
    score_relations(ws, "disease_gene", score=knows_the_kb(ws))
    whole = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL,
                         gate=False)
    assert whole.measurement.pool == len(pool) and not any(
        "left out of the measurement" in n for n in whole.measurement.notes)
    # one that learned labels of a dev and a test relation's groups
    ident = Models(ws).register(
        schema="disease_gene", recipe="cross", base_model="tiny-bert",
        model_dir=tiny_cross_encoder, created_by="admin",
        manifest={"kind": "cross", "examples": {"labels": {"learned_groups": learned}}}).id
    Settings(ws).put(ACTIVE_KEY.format(schema="disease_gene"), ident)
    knows = knows_the_kb(ws)  # other values: a model of its own, not the first one again
    score_relations(ws, "disease_gene", score=lambda q, docs: knows(q, docs) / 2)
    rnd = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL,
                       gate=False)
    assert rnd.version.manifest["cross"]["version"] == ident
    gone = {q.qid for q in task.queries if q.split != "train" and q.group in learned}
    assert gone >= {dev.qid, test.qid} and rnd.measurement.pool == len(pool) - len(gone)
    assert set(rnd.version.manifest["heldout_per_query"]) == pool - gone
    assert (f"{len(gone)} held-out queries left out of the measurement: {ident} learned "
            f"curators' labels of their {len(learned)} query group(s)") in rnd.measurement.notes[0]
    # choosing the default leaves the test queries of those groups out of every configuration
    current = active_version(ws, "disease_gene")
    if current is None or current.id != rnd.version.id:
        promote_ranker(ws, rnd.version.id, user=ADMIN, reason="test")
    measured, notes = unlearned_task(ws, "disease_gene", "test", rnd.version.id)
    dropped = {q.qid for q in task.split("test") if q.group in learned}
    assert test.qid in dropped and {q.qid for q in measured.split("test")} == {
        q.qid for q in task.split("test")} - dropped
    assert notes == [f"{len(dropped)} test queries left out of every configuration: {ident} "
                     "learned labels of their query groups"]
