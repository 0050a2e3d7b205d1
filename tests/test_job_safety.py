"""Job safety: abandoned queued jobs, waiting out a busy workspace, who may cancel, and the
parameter whitelist + path checks every job kind goes through at submission."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from curation.access.users import PermissionDenied, Role, User
from curation.jobs import guards, kinds
from curation.jobs.kinds import JobKind, get_kind, job_kinds
from curation.jobs.queue import (
    ORPHAN_AFTER_S,
    SYSTEM_USER,
    JobStatus,
    cancel_job,
    get_job,
    list_jobs,
    run_job,
    submit_job,
    wait_for_job,
)
from curation.store.errors import WorkspaceBusyError
from curation.store.workspace import DB_NAME
from kb_sources.errors import CurationError, UnknownNameError

ADMIN = User("root", Role.ADMIN)
CURATOR = User("cur", Role.CURATOR)
ANNOTATOR = User("ann", Role.ANNOTATOR)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def set_job(ws, job_id: int, **columns) -> None:
    sets = ", ".join(f"{name} = ?" for name in columns)
    with ws.transaction():
        ws.conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*columns.values(), job_id))


# -- item 1: a queued job whose worker is gone ---------------------------------------------------
def test_worker_killed_before_it_claims_the_job_fails_the_job(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {"steps": 2}, user=ADMIN)
    os.kill(job.pid, signal.SIGKILL)  # long before python has imported the worker
    os.waitpid(job.pid, 0)  # the kill has landed (and the child is reaped)
    failed = get_job(tmp_workspace, job.id)
    assert failed.status is JobStatus.FAILED
    assert f"the worker process (pid {job.pid}) stopped before it started the job" in failed.error
    assert f"job-{job.id}.log" in failed.error and "Start the job again" in failed.error


def test_queued_job_with_a_dead_worker_reports_the_last_log_line(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    pid = dead_pid()
    set_job(tmp_workspace, job.id, pid=pid)
    log = tmp_workspace.root / "cache" / "jobs" / f"job-{job.id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("starting\nWorkspaceBusyError: gave up after 8 attempts\n\n", encoding="utf-8")
    failed = get_job(tmp_workspace, job.id)
    assert failed.status is JobStatus.FAILED
    assert failed.error == (f"the worker process (pid {pid}) stopped before it started the job; "
                            "last log line: WorkspaceBusyError: gave up after 8 attempts; "
                            f"see {log}. Start the job again")
    # recorded, not only reported
    row = tmp_workspace.conn.execute("SELECT status FROM jobs WHERE id = ?", (job.id,)).fetchone()
    assert row[0] == "failed"


def test_queued_job_that_never_got_a_worker_fails_after_the_grace_period(tmp_workspace):
    fresh = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    old = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    set_job(tmp_workspace, old.id, updated_at="2020-01-01T00:00:00+00:00")
    assert get_job(tmp_workspace, fresh.id).status is JobStatus.QUEUED
    failed = get_job(tmp_workspace, old.id)
    assert failed.status is JobStatus.FAILED
    assert failed.error.startswith(f"no worker process was started for it within "
                                   f"{ORPHAN_AFTER_S:g} s")


def test_ensure_index_job_replaces_an_abandoned_queued_job(tmp_workspace):
    from curation.search.choices import ensure_index_job
    from curation.search.indexing import index_ready

    stuck = submit_job(tmp_workspace, "index", {"retriever": "bm25"}, user=CURATOR, start=False)
    set_job(tmp_workspace, stuck.id, pid=dead_pid())
    fresh = ensure_index_job(tmp_workspace, "bm25", user=CURATOR)
    assert fresh.id != stuck.id
    assert get_job(tmp_workspace, stuck.id).status is JobStatus.FAILED
    done = wait_for_job(tmp_workspace, fresh.id, timeout=120)
    assert done.status is JobStatus.DONE, done.error
    assert index_ready(tmp_workspace, "bm25")


def hold_write_lock(ws) -> sqlite3.Connection:
    other = sqlite3.connect(ws.root / DB_NAME, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_claim_waits_for_a_busy_workspace_with_logged_retries(tmp_workspace, monkeypatch,
                                                             caplog):
    job = submit_job(tmp_workspace, "selftest", {"steps": 1}, user=ADMIN, start=False)
    other = hold_write_lock(tmp_workspace)
    pauses = []

    def pause(seconds: float) -> None:  # the other transaction ends during the first pause
        pauses.append(seconds)
        other.execute("COMMIT")

    monkeypatch.setattr(guards.time, "sleep", pause)
    caplog.set_level(logging.WARNING, logger="curation.jobs.guards")
    with tmp_workspace.lock_wait(0.05):
        done = run_job(tmp_workspace, job.id)
    other.close()
    assert done.status is JobStatus.DONE and done.result["steps"] == 1
    assert pauses == [1.0]
    assert f"job {job.id}: mark running: workspace busy (attempt 1 of 8); retrying in 1 s" \
        in caplog.text


def test_claim_gives_up_after_bounded_retries(tmp_workspace, monkeypatch):
    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    other = hold_write_lock(tmp_workspace)
    pauses: list[float] = []
    monkeypatch.setattr(guards.time, "sleep", pauses.append)
    with tmp_workspace.lock_wait(0.01), pytest.raises(
            WorkspaceBusyError, match=f"job {job.id}: mark running: gave up after 8 attempts"):
        run_job(tmp_workspace, job.id)
    other.execute("ROLLBACK")
    other.close()
    assert pauses == [1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0]
    assert get_job(tmp_workspace, job.id).status is JobStatus.QUEUED  # nothing half-done


def test_a_claimed_job_cannot_be_claimed_again(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    assert run_job(tmp_workspace, job.id).status is JobStatus.DONE
    with pytest.raises(CurationError, match=f"Job {job.id} is done, not queued"):
        run_job(tmp_workspace, job.id)


# -- item 6: who may cancel ----------------------------------------------------------------------
def test_cancel_without_a_user_is_refused(tmp_workspace):
    job = submit_job(tmp_workspace, "index", {"retriever": "bm25"}, user=ANNOTATOR, start=False)
    with pytest.raises(PermissionDenied, match=rf"Cancelling job {job.id} \(index\) needs its "
                       "owner or an admin; no user was given"):
        cancel_job(tmp_workspace, job.id, user=None)
    assert get_job(tmp_workspace, job.id).status is JobStatus.QUEUED


def test_only_the_owner_or_an_admin_cancels(tmp_workspace):
    job = submit_job(tmp_workspace, "index", {"retriever": "bm25"}, user=ANNOTATOR, start=False)
    with pytest.raises(PermissionDenied, match=r"needs its owner \(ann\) or the admin role; "
                       r"cur \(curator\) may not do it"):
        cancel_job(tmp_workspace, job.id, user=CURATOR)
    cancelled = cancel_job(tmp_workspace, job.id, user=ANNOTATOR)
    assert cancelled.status is JobStatus.CANCELLED and cancelled.error == "cancelled by ann"
    audit = tmp_workspace.audit_log("job", limit=1)[0]
    assert (audit.actor, audit.action, audit.object_id) == ("ann", "cancel", str(job.id))


def test_the_system_actor_and_admins_cancel_anything(tmp_workspace):
    anonymous = submit_job(tmp_workspace, "index", {"retriever": "bm25"}, user=SYSTEM_USER,
                           start=False)
    with pytest.raises(PermissionDenied, match=r"needs its owner \(<system>\) or the admin"):
        cancel_job(tmp_workspace, anonymous.id, user=ANNOTATOR)
    assert cancel_job(tmp_workspace, anonymous.id, user=SYSTEM_USER).error == \
        "cancelled by <system>"
    admin_job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    with pytest.raises(PermissionDenied, match="needs the admin role"):
        cancel_job(tmp_workspace, admin_job.id, user=CURATOR)
    assert cancel_job(tmp_workspace, admin_job.id, user=ADMIN).status is JobStatus.CANCELLED


def test_cancelling_does_not_overwrite_a_finished_job(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    run_job(tmp_workspace, job.id)
    assert cancel_job(tmp_workspace, job.id, user=ADMIN).status is JobStatus.DONE


# -- item 6: parameters are whitelisted per kind and paths stay in the workspace -----------------
def test_unknown_parameters_are_refused_with_the_allowed_ones(tmp_workspace):
    with pytest.raises(CurationError, match=r"Job kind 'index' got unknown parameter\(s\) "
                       r"cache_dir. Available options: retriever, options, rebuild"):
        submit_job(tmp_workspace, "index", {"retriever": "dense", "cache_dir": "/tmp"},
                   user=ANNOTATOR, start=False)
    with pytest.raises(CurationError, match="Available options: schema, options"):
        submit_job(tmp_workspace, "train", {"schema": "PO", "epochs": 1}, user=ADMIN,
                   start=False)
    assert list_jobs(tmp_workspace) == []


def test_every_kind_declares_its_parameters():
    assert {kind.name: kind.params for kind in job_kinds()} == {
        "activate": ("schema", "version", "reason"),
        "evaluate": ("schema", "retrievers", "split", "options"),
        "index": ("retriever", "options", "rebuild"),
        "cross_scores": ("schema", "version", "k", "query_keys", "text"),
        "train": ("schema", "options", "recipe"),
        "retrain": ("schema", "options"),
        "rank": ("schema", "labels", "labeller"),
        "simulate": ("schema", "config", "options"),
        "selftest": ("steps",),
        "pubmed_search": ("schema", "slots", "query", "max_hits", "rank_text"),
        "watch": ("watch_id",),
        "measure_defaults": (),
    }
    for kind in job_kinds():  # every target and validator names a real function
        assert callable(kind.load())
        if kind.validator:
            module, name = kind.validator.split(":")
            assert callable(getattr(importlib.import_module(module), name))
    assert get_kind("index").validator == "curation.search.indexing:check_index_params"
    assert get_kind("rank").validator == "curation.training.ranker:check_rank_params"
    # a curator's labels start it as the system, on the labeller's behalf (issue 35 item 7)
    assert get_kind("rank").admin_only


@pytest.mark.parametrize(("options", "message"), [
    ({"cache_dir": "/tmp/elsewhere"}, "options.cache_dir='/tmp/elsewhere' resolves to "
                                      "/tmp/elsewhere, outside the workspace"),
    ({"cache_dir": "cache/emb"}, "options.cache_dir='cache/emb' is a relative path; give it as "
                                 "an absolute path inside the workspace"),
    ({"cache_dir": 3}, "options.cache_dir is 3; expected an absolute path"),
    ({"model": "/etc"}, "options.model='/etc' is not a model version of this workspace"),
    ({"dense": {"cache_dir": "/tmp/x"}}, "options.dense.cache_dir='/tmp/x' resolves to"),
    ([1, 2], "option options is list"),
])
def test_paths_outside_the_workspace_are_refused(tmp_workspace, options, message):
    name = "hybrid" if "dense" in options else "dense"
    with pytest.raises(CurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        submit_job(tmp_workspace, "index", {"retriever": name, "options": options},
                   user=ANNOTATOR, start=False)
    assert list_jobs(tmp_workspace) == []


def test_a_link_out_of_the_workspace_is_refused(tmp_workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_workspace.root / "cache" / "link"
    link.symlink_to(outside)
    expected = f"resolves to {outside / 'emb'}, outside the workspace"
    with pytest.raises(CurationError, match=expected):
        submit_job(tmp_workspace, "index", {"retriever": "dense",
                                            "options": {"cache_dir": str(link / "emb")}},
                   user=ANNOTATOR, start=False)


def test_paths_inside_the_workspace_and_known_models_are_accepted(tmp_workspace):
    inside = str(tmp_workspace.root / "cache" / "embeddings-2")
    job = submit_job(tmp_workspace, "index",
                     {"retriever": "dense", "rebuild": True,
                      "options": {"cache_dir": inside, "model": "all-MiniLM-L6-v2"}},
                     user=ANNOTATOR, start=False)
    assert job.params["options"]["cache_dir"] == inside


def test_index_validator_checks_retriever_and_rebuild(tmp_workspace):
    with pytest.raises(UnknownNameError, match="Unknown retriever 'bm99'. Available options: "
                       "bm25, dense, hybrid"):
        submit_job(tmp_workspace, "index", {"retriever": "bm99"}, user=ANNOTATOR, start=False)
    with pytest.raises(CurationError, match="rebuild='yes'; expected true or false"):
        submit_job(tmp_workspace, "index", {"retriever": "bm25", "rebuild": "yes"},
                   user=ANNOTATOR, start=False)


def only_even_steps(ws, params) -> None:
    if params.get("steps", 0) % 2:
        raise CurationError(f"steps={params['steps']} is odd; give an even number")


def test_a_kind_validates_its_own_values_through_its_validator(tmp_workspace, monkeypatch):
    probe = JobKind("probe", "curation.jobs.queue:selftest", "test kind", params=("steps",),
                    validator=f"{__name__}:only_even_steps")
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([probe]))
    with pytest.raises(CurationError, match="steps=3 is odd; give an even number"):
        submit_job(tmp_workspace, "probe", {"steps": 3}, user=ADMIN, start=False)
    job = submit_job(tmp_workspace, "probe", {"steps": 2}, user=ADMIN, start=False)
    assert run_job(tmp_workspace, job.id).result["steps"] == 2
