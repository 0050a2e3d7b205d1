"""Background jobs: server-side permission checks, worker process, progress, failure."""

from __future__ import annotations

import os

import pytest

from curation.access.users import PermissionDenied, Role, User
from curation.jobs.queue import (
    JobStatus,
    cancel_job,
    get_job,
    list_jobs,
    run_job,
    submit_job,
    wait_for_job,
)
from kb_sources.errors import UnknownNameError

ADMIN = User("root", Role.ADMIN)
CURATOR = User("cur", Role.CURATOR)


def test_admin_job_runs_in_worker_process(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {"steps": 4}, user=ADMIN)
    assert job.status is JobStatus.QUEUED and job.pid and job.pid != os.getpid()
    done = wait_for_job(tmp_workspace, job.id)
    assert done.status is JobStatus.DONE, done.error
    assert done.result == {"steps": 4, "pid": done.pid} and done.progress == 1.0
    assert done.message == "step 4 of 4" and done.created_by == "root"
    assert [j.id for j in list_jobs(tmp_workspace)] == [job.id]


def test_non_admin_cannot_start_admin_job(tmp_workspace):
    with pytest.raises(PermissionDenied,
                       match="Starting a job of kind .evaluate. needs the admin role"):
        submit_job(tmp_workspace, "evaluate", {}, user=CURATOR)
    with pytest.raises(PermissionDenied):
        submit_job(tmp_workspace, "selftest", {}, user=None)
    assert list_jobs(tmp_workspace) == []


def test_unknown_kind_lists_options(tmp_workspace):
    with pytest.raises(UnknownNameError, match="Available options: activate, cross_scores, "
                       "evaluate, index, measure_defaults, "
                       "pubmed_search, rank, retrain, selftest, simulate, train, watch$"):
        submit_job(tmp_workspace, "train-everything", {}, user=ADMIN)


def test_failure_is_recorded(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {"steps": "three"}, user=ADMIN, start=False)
    done = run_job(tmp_workspace, job.id)
    assert done.status is JobStatus.FAILED and "TypeError" in done.error


def test_cancel_stops_at_next_progress(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {"steps": 2}, user=ADMIN, start=False)
    assert cancel_job(tmp_workspace, job.id, user=ADMIN).status is JobStatus.CANCELLED
    with pytest.raises(Exception, match="is cancelled, not queued"):
        run_job(tmp_workspace, job.id)


def test_dead_worker_is_reported(tmp_workspace):
    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    with tmp_workspace.transaction():
        tmp_workspace.conn.execute("UPDATE jobs SET status='running', pid=999999 WHERE id=?",
                                   (job.id,))
    failed = get_job(tmp_workspace, job.id)
    assert failed.status is JobStatus.FAILED and "stopped unexpectedly" in failed.error


def test_wait_for_job_times_out_with_the_state(tmp_workspace):
    from kb_sources.errors import CurationError

    job = submit_job(tmp_workspace, "selftest", {}, user=ADMIN, start=False)
    with pytest.raises(CurationError, match=f"Job {job.id} is still queued after 0.3 s"):
        wait_for_job(tmp_workspace, job.id, timeout=0.3, poll=0.1)
