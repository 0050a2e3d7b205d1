"""Job kinds register themselves (issue 27 item 4): each wing declares its kinds in its own
``job_kinds`` module, named in the entry-point group ``kbcurate.job_kinds``; the jobs wing knows
only its own kind (``selftest``) and names no other wing's code."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from curation.jobs import kinds
from curation.jobs.kinds import GROUP, JobKind, find_kind, get_kind, job_kinds
from kb_sources.errors import UnknownNameError
from kb_sources.plugins import load_target

ROOT = Path(__file__).resolve().parents[1]

#: Every kind of today: name -> (target, description, admin_only, params, validator).
TODAY = {
    "evaluate": ("curation.evaluation.runner:run_evaluation",
                 "evaluate retrievers on a schema's held-out queries", True,
                 ("schema", "retrievers", "split", "options"), None),
    "index": ("curation.search.indexing:run_index_job",
              "build or update a retriever index over the workspace documents", False,
              ("retriever", "options", "rebuild"), "curation.search.indexing:check_index_params"),
    "cross_scores": ("curation.search.cross_scores:run_cross_job",
                     "score each relation's top K with the active cross-encoder into the "
                     "workspace's cache (the learned ranker's cross feature)", False,
                     ("schema", "version", "k", "query_keys", "text"),
                     "curation.search.cross_scores:check_cross_params"),
    "train": ("curation.training.jobs:run_training",
              "train a dense retriever (EDEL, BiCA or BioHiCL) into a new model version", True,
              ("schema", "options", "recipe"), None),
    "retrain": ("curation.training.jobs:run_retrain",
                "retrain a schema's model on KB + labels; promote it if it passes the gate", True,
                ("schema", "options"), None),
    "activate": ("curation.training.activation:run_activation",
                 "build a model version's dense and hybrid indexes, then make it the active one",
                 True, ("schema", "version", "reason"),
                 "curation.training.activation:check_activation_params"),
    "rank": ("curation.training.ranker:run_ranker_job",
             "retrain a schema's learned ranker on KB + labels (seconds); the gate promotes it",
             True, ("schema", "labels", "labeller"), "curation.training.ranker:check_rank_params"),
    "measure_defaults": ("curation.training.defaults:run_defaults_job",
                         "train each schema's learned ranker and record its measured default "
                         "ranking (the demo's last step, after the app is served)", True, (),
                         None),
    "pubmed_search": ("curation.pubmed.jobs:run_pubmed_search_job",
                      "search PubMed for a relation, fetch and import the new abstracts, rank "
                      "them", False, ("schema", "slots", "query", "max_hits", "rank_text"),
                      "curation.pubmed.jobs:check_pubmed_params"),
    "watch": ("curation.pubmed.watch_jobs:run_watch_job",
              "run a watch: fetch, import and rank what PubMed added since its last run", False,
              ("watch_id",), "curation.pubmed.watch_jobs:check_watch_params"),
    "simulate": ("curation.simulation.jobs:run_simulation",
                 "simulate labelling and retraining rounds in a copy of the workspace", True,
                 ("schema", "config", "options"), None),
    "selftest": ("curation.jobs.queue:selftest",
                 "check that background workers start and report progress", True, ("steps",),
                 None),
}


def test_the_jobs_wing_names_no_other_wings_code():
    for path in sorted((ROOT / "curation" / "jobs").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for wing in ("curation.training", "curation.search", "curation.evaluation"):
            assert wing not in text, f"{path.relative_to(ROOT)} names {wing}"
        assert "curation.pubmed" not in text


def test_every_kind_of_today_is_registered_and_loads():
    found = {kind.name: (kind.target, kind.description, kind.admin_only, kind.params,
                         kind.validator) for kind in job_kinds()}
    assert found == TODAY
    for kind in job_kinds():
        assert callable(kind.load()), kind.name
        if kind.validator:
            assert callable(load_target(kind.validator)), kind.name
        assert get_kind(kind.name) is kind and find_kind(kind.name) is kind


def test_the_product_kinds_come_from_its_wings_not_from_entry_points(monkeypatch):
    """Issue 42 item 12: with no entry point at all (the product's own hidden by a shadowing
    distribution), every product kind is still there: read from the wings' modules."""
    from kb_sources import plugins

    assert kinds.JOB_KINDS.group == GROUP == "kbcurate.job_kinds"
    assert kinds.product_kind_modules() == [
        "curation.evaluation.job_kinds", "curation.pubmed.job_kinds", "curation.search.job_kinds",
        "curation.simulation.job_kinds", "curation.training.job_kinds"]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])  # no distribution declares any
    registry = kinds.job_kind_registry()
    assert registry.names()[0] == "selftest" and set(registry.names()) == set(TODAY)
    assert registry.get("activate").target == TODAY["activate"][0]


def test_a_distribution_named_kbcurate_cannot_take_the_product_kinds(monkeypatch, caplog):
    """Issue 42 item 12: a distribution whose metadata name is ``kbcurate``, first on sys.path,
    hides the product's own entry points (importlib.metadata keeps one distribution per name)
    and declares ``activate`` and ``rank`` open to everyone: both are refused and logged, the
    product's stay; a new kind of it is read as any plug-in's."""
    from kb_sources import plugins

    evil = (JobKind("activate", "evil.jobs:run", "hijacked", admin_only=False),
            JobKind("rank", "evil.jobs:run", "hijacked", admin_only=False),
            JobKind("harvest", "evil.jobs:harvest", "a new kind", admin_only=False))
    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: [_fake_plugin("training", evil, dist="kbcurate")])
    with caplog.at_level("WARNING"):
        registry = kinds.job_kind_registry()
        assert registry.get("activate").target == TODAY["activate"][0]
        assert registry.get("activate").admin_only is True
        assert registry.get("rank").target == TODAY["rank"][0]
    assert set(registry.names()) == {*TODAY, "harvest"}
    refused = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert refused == [
        "job kind plug-in activate (evil.job_kinds:training) refused: 'activate' is a built-in "
        "job kind; give the plug-in's entry another name",
        "job kind plug-in rank (evil.job_kinds:training) refused: 'rank' is a built-in job "
        "kind; give the plug-in's entry another name"]


def test_the_products_own_entry_points_are_read_once_without_complaint(caplog):
    """The product's pyproject.toml still names its wings' modules: those are skipped, not
    refused as duplicates of themselves."""
    with caplog.at_level("WARNING"):
        assert set(kinds.job_kind_registry().names()) == set(TODAY)
    assert [r for r in caplog.records if r.name in ("kb_sources.plugins", kinds.__name__)] == []


def test_each_kind_has_an_end(monkeypatch, caplog):
    """Issue 42 item 3: every job kind has a longest run time; the NCBI kinds short, the
    others a day; the environment overrides one kind's, in minutes."""
    limits = {kind.name: kind.max_seconds for kind in job_kinds()}
    assert limits == {**dict.fromkeys(TODAY, 24 * 3600.0), "pubmed_search": 20 * 60.0,
                      "watch": 30 * 60.0, "selftest": 600.0, "measure_defaults": 3 * 3600.0,
                      "cross_scores": 6 * 3600.0}
    search = get_kind("pubmed_search")
    assert search.max_minutes_env == "KBCURATE_JOB_MAX_MINUTES_PUBMED_SEARCH"
    assert search.max_run_s() == 1200.0
    monkeypatch.setenv("KBCURATE_JOB_MAX_MINUTES_PUBMED_SEARCH", "45")
    assert search.max_run_s() == 2700.0
    monkeypatch.setenv("KBCURATE_JOB_MAX_MINUTES_PUBMED_SEARCH", "soon")
    with caplog.at_level("WARNING"):
        assert search.max_run_s() == 1200.0
    assert "KBCURATE_JOB_MAX_MINUTES_PUBMED_SEARCH='soon' ignored: expected minutes > 0, e.g. " \
           "45; a pubmed_search job may run 20 min" in caplog.messages


def test_each_wing_declares_its_kinds_through_the_entry_points():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    group = declared["project"]["entry-points"][GROUP]
    assert group == {"evaluation": "curation.evaluation.job_kinds:JOB_KINDS",
                     "pubmed": "curation.pubmed.job_kinds:JOB_KINDS",
                     "search": "curation.search.job_kinds:JOB_KINDS",
                     "simulation": "curation.simulation.job_kinds:JOB_KINDS",
                     "training": "curation.training.job_kinds:JOB_KINDS"}
    names = {wing: [kind.name for kind in load_target(target)] for wing, target in group.items()}
    assert names == {"evaluation": ["evaluate"], "search": ["index", "cross_scores"],
                     "pubmed": ["pubmed_search", "watch"],
                     "simulation": ["simulate"],
                     "training": ["train", "retrain", "activate", "rank", "measure_defaults"]}
    for target in group.values():
        assert all(isinstance(kind, JobKind) for kind in load_target(target))


def test_an_unknown_kind_lists_the_available_ones():
    with pytest.raises(UnknownNameError, match=r"Unknown job kind 'train-everything'. Available "
                       "options: activate, cross_scores, evaluate, index, measure_defaults, "
                       "pubmed_search, rank, retrain, selftest, simulate, train, watch$"):
        get_kind("train-everything")
    assert find_kind("train-everything") is None


def test_a_test_may_register_a_kind_of_its_own(monkeypatch):
    probe = JobKind("probe", "curation.jobs.queue:selftest", "test kind", params=("steps",))
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([probe]))
    assert get_kind("probe") is probe
    assert {kind.name for kind in job_kinds()} == {*TODAY, "probe"}


def test_the_job_queues_are_one_registry_with_the_names_the_store_accepts():
    from curation.jobs.queues import QUEUES, TABLE_QUEUE, table_queue
    from curation.store.database import JOB_QUEUES, StoreSettings
    from curation.store.errors import WorkspaceError
    from kb_sources.plugins import load_target

    assert tuple(QUEUES.names()) == JOB_QUEUES
    assert table_queue(StoreSettings()) is TABLE_QUEUE
    assert load_target(QUEUES.get("table").target) is table_queue
    assert load_target(QUEUES.get("procrastinate").target).__name__ == "ProcrastinateQueue"
    with pytest.raises(WorkspaceError, match="Available options: table, procrastinate"):
        QUEUES.get("celery")


def _fake_plugin(name: str, kinds_: tuple[JobKind, ...], dist: str = "evil-plugin"):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, value=f"evil.job_kinds:{name}", load=lambda: kinds_,
                           dist=SimpleNamespace(name=dist))


def test_a_plugin_cannot_replace_a_product_kind(monkeypatch, caplog):
    """Issue 35 item 6: a distribution listed before the product's own that declares ``activate``
    and ``rank`` with admin_only=False is refused; the product's kinds stay built-ins."""
    from importlib.metadata import entry_points as real_entry_points

    from kb_sources import plugins

    evil = (JobKind("activate", "evil.jobs:run", "hijacked", admin_only=False),
            JobKind("rank", "evil.jobs:run", "hijacked", admin_only=False),
            JobKind("harvest", "evil.jobs:harvest", "a new kind of the plug-in", admin_only=False))
    product = list(real_entry_points(group=GROUP))
    assert {ep.dist.name for ep in product} == {"kbcurate"}
    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: [_fake_plugin("evil", evil), *product])
    registry = kinds.job_kind_registry()
    with caplog.at_level("ERROR", logger="kb_sources.plugins"):
        assert registry.get("activate").target == TODAY["activate"][0]
        assert registry.get("activate").admin_only is True
        assert registry.get("rank").target == TODAY["rank"][0]
    assert registry.get("harvest").target == "evil.jobs:harvest"  # a new name is welcome
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 2 and "'activate' is a built-in job kind" in refused[0]
    assert set(registry.names()) == {*TODAY, "harvest"}
    assert registry.names()[-1] == "harvest"  # plug-ins after every built-in


def test_two_plugins_naming_one_kind_keep_the_first(monkeypatch, caplog):
    from kb_sources import plugins

    first = (JobKind("harvest", "a.jobs:run", "first"),)
    second = (JobKind("harvest", "b.jobs:run", "second"),)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [
        _fake_plugin("a", first, "a"), _fake_plugin("b", second, "b")])
    with caplog.at_level("ERROR", logger="kb_sources.plugins"):
        assert kinds.job_kind_registry().get("harvest").target == "a.jobs:run"
    assert any("another one already registered 'harvest'" in r.getMessage()
               for r in caplog.records)


def test_a_kind_limited_to_roles_refuses_the_others_in_the_library(tmp_path):
    """A PubMed search spends the lab's NCBI quota and adds shared documents: curators and
    admins only, refused in submit_job itself (not only hidden in the app)."""
    from curation.access.users import PermissionDenied, Role, User
    from curation.jobs.queue import submit_job
    from curation.store.workspace import Workspace

    assert get_kind("pubmed_search").roles == frozenset({Role.CURATOR})
    params = {"schema": "PO", "slots": {"gene": "BRAF"}, "max_hits": 10}
    with Workspace.init(tmp_path / "ws") as ws:
        with pytest.raises(PermissionDenied, match=r"kind 'pubmed_search' needs the admin or "
                           r"curator role; ann \(annotator\) may not do it"):
            submit_job(ws, "pubmed_search", params, user=User("ann", Role.ANNOTATOR),
                       start=False)
        job = submit_job(ws, "pubmed_search", params, user=User("cur", Role.CURATOR),
                         start=False)
        assert job.created_by == "cur"
