"""Activating a dense model version is a background job (issue 26 items 1, 2 and 7): the request
returns at once, the job builds the version's dense and hybrid indexes with progress, then switches;
"dense · active" / "hybrid · active" search with the version the job activated."""

from __future__ import annotations

import pytest
from loop_fixtures import make_loop_workspace

from curation.access.users import PermissionDenied, Role, User
from curation.jobs.queue import JobContext, JobStatus, cancel_job, list_jobs, run_job, submit_job
from curation.search.choices import parse_retriever_choice, resolve_retriever_choice
from curation.search.indexing import get_index, index_ready
from curation.store.models import Models
from curation.training.activation import start_activation, switch_active
from kb_sources.errors import CurationError, UnknownNameError

ADMIN, CURATOR = User("boss", Role.ADMIN), User("cur", Role.CURATOR)
DOCS = 50  # loop_fixtures: 15 gene papers, 15 clinical courses, 20 cohort studies ...
TEXTS = 45  # ... of which 45 distinct texts (five diseases have two genes, so two courses)
FMT = "{title} [SEP] {abstract}"


def register(ws, model_dir, schema: str = "disease_gene"):
    return Models(ws).register(schema=schema, recipe="edel", base_model="tiny",
                               model_dir=model_dir, created_by="boss",
                               manifest={"max_seq_length": 32, "document_format": FMT})


@pytest.fixture
def two_versions(tmp_workspace, tiny_model_path):
    """A loop workspace with v1 active (no index built) and v2 a candidate."""
    make_loop_workspace(tmp_workspace)
    v1 = register(tmp_workspace, tiny_model_path)
    Models(tmp_workspace).activate(v1.id, ADMIN, reason="first")
    v2 = register(tmp_workspace, tiny_model_path)
    return tmp_workspace, v1, v2


class Recording(JobContext):
    """A job context that keeps every progress message (and can cancel the job at one)."""

    def __init__(self, ws, job_id, cancel_at: str | None = None):
        super().__init__(ws, job_id)
        self.messages: list[tuple[float, str]] = []
        self.cancel_at = cancel_at

    def progress(self, fraction: float, message: str = "") -> None:
        self.messages.append((fraction, message))
        if self.cancel_at and self.cancel_at in message:
            cancel_job(self.ws, self.job_id, user=ADMIN)
        super().progress(fraction, message)


def searched_model(ws, choice: str) -> str:
    """The retriever label of the first hit of ``choice`` pinned to disease_gene's active
    version (the model id names the version)."""
    name, options = parse_retriever_choice(choice, ws=ws, schema="disease_gene")
    assert index_ready(ws, name, options), f"{choice}: index not built"
    return get_index(ws, name, options, progress=False).search("BRAF melanoma", 3)[0].retriever


def test_the_request_returns_a_queued_job_and_the_old_version_stays_active(two_versions):
    ws, v1, v2 = two_versions
    job = start_activation(ws, ADMIN, v2.id, "  spot checks look better ", start=False)
    assert job.kind == "activate" and job.status is JobStatus.QUEUED
    assert job.params == {"schema": "disease_gene", "version": v2.id,
                          "reason": "spot checks look better"}
    assert job.created_by == "boss"
    assert Models(ws).active("disease_gene").id == v1.id
    assert not index_ready(ws, "dense", {"model": v2.id})
    again = start_activation(ws, ADMIN, v1.id, "roll back", start=False)  # one at a time
    assert again.id == job.id and [j.id for j in list_jobs(ws, "activate")] == [job.id]


def test_three_admins_at_the_same_instant_start_one_activation(two_versions, monkeypatch):
    """Issue 35 item 5: the page's "is one unfinished?" look and the insert were two steps, so
    three admins clicking at once each saw none and queued three jobs. The database decides now:
    here every caller's look is made to miss (as when all three looked before any insert)."""
    from curation.training import activation

    ws, v1, v2 = two_versions
    monkeypatch.setattr(activation, "unfinished_activation", lambda ws, schema: None)
    admins = [User(name, Role.ADMIN) for name in ("boss", "ada", "max")]
    jobs = [start_activation(ws, admin, v2.id, f"reason of {admin.name}", start=False)
            for admin in admins]
    assert {j.id for j in jobs} == {jobs[0].id}
    assert [j.id for j in list_jobs(ws, "activate")] == [jobs[0].id]
    assert jobs[0].created_by == "boss"
    # once it is finished, the next activation of the schema queues a new job
    cancel_job(ws, jobs[0].id, user=admins[0])
    later = start_activation(ws, admins[1], v1.id, "roll back", start=False)
    assert later.id != jobs[0].id and later.created_by == "ada"


def test_the_job_builds_both_indexes_with_progress_then_switches(two_versions):
    ws, v1, v2 = two_versions
    job = start_activation(ws, ADMIN, v2.id, "better", start=False)
    ctx = Recording(ws, job.id)
    done = run_job(ws, job.id, context=ctx)
    assert done.status is JobStatus.DONE, done.error
    messages = [m for _, m in ctx.messages]
    assert messages[0] == f"building the index of {v2.id}: 0 of {DOCS} documents"
    assert f"building the index of {v2.id}: {DOCS} of {DOCS} documents" in messages
    assert f"building the hybrid index of {v2.id}: {DOCS} of {DOCS} documents" in messages
    assert messages[-1] == f"activating {v2.id}"
    fractions = [f for f, _ in ctx.messages]
    assert fractions == sorted(fractions) and fractions[-1] == 0.99
    result = done.result
    assert (result["version"], result["previous"], result["schema"]) == (
        v2.id, v1.id, "disease_gene")
    assert result["documents"] == DOCS and result["encoded"] == TEXTS
    assert result["backend"] == "torch/fp32" and result["docs_per_s"] > 0
    assert result["seconds"] == pytest.approx(result["dense_s"] + result["hybrid_s"], abs=0.02)
    assert Models(ws).active("disease_gene").id == v2.id
    (audit,) = [a for a in ws.audit_log("model", limit=50)
                if a.action == "activate" and a.object_id == v2.id]
    assert audit.actor == "boss" and "better" in audit.after
    model_id = f"dense:{v2.id.replace('@', '-')}"
    assert searched_model(ws, "dense · active").startswith(model_id)
    assert model_id in searched_model(ws, "hybrid · active")
    assert searched_model(ws, "hybrid · active").startswith("hybrid:rrf(bm25+")


def test_no_second_build_of_an_index_its_activation_is_building(two_versions):
    """Issue 36 item 7: while an activation encodes, the Curate page offered "Build the dense
    index in the background" for the same version, and a second build could start."""
    from curation.search.choices import VERSION_SEP, ensure_index_job, last_index_job

    ws, _, v2 = two_versions
    job = start_activation(ws, ADMIN, v2.id, "better", start=False)
    for choice in ("dense", "hybrid"):
        base, options = parse_retriever_choice(f"{choice}{VERSION_SEP}{v2.id}")
        assert last_index_job(ws, base, options).id == job.id
        assert ensure_index_job(ws, base, options, user=ADMIN).id == job.id
    assert list_jobs(ws, "index") == []
    cancel_job(ws, job.id, user=ADMIN)
    base, options = parse_retriever_choice(f"dense{VERSION_SEP}{v2.id}")
    assert last_index_job(ws, base, options) is None


def test_index_jobs_of_one_index_are_deduplicated_in_the_database(two_versions, monkeypatch):
    from curation.search import choices

    ws, _, v2 = two_versions
    monkeypatch.setattr(choices, "active_index_job", lambda *a, **k: None)  # every look misses
    options = {"model": v2.id}
    jobs = [submit_job(ws, "index", {"retriever": "dense", "options": options}, user=ADMIN,
                       start=False) for _ in range(3)]
    assert len({j.id for j in jobs}) == 1
    other = submit_job(ws, "index", {"retriever": "bm25"}, user=ADMIN, start=False)
    assert other.id != jobs[0].id


def test_a_cancelled_or_failed_job_leaves_the_old_version_active(two_versions):
    ws, v1, v2 = two_versions
    job = start_activation(ws, ADMIN, v2.id, "better", start=False)
    ended = run_job(ws, job.id, context=Recording(ws, job.id, cancel_at=f"{DOCS} of {DOCS}"))
    assert ended.status is JobStatus.CANCELLED
    assert Models(ws).active("disease_gene").id == v1.id
    assert not index_ready(ws, "dense", {"model": v2.id})  # the half-built index is not saved

    (v2.model_dir / "model.safetensors").write_bytes(b"changed")
    job = start_activation(ws, ADMIN, v2.id, "better", start=False)
    ended = run_job(ws, job.id)
    assert ended.status is JobStatus.FAILED
    assert "do not match the checksum recorded at training" in ended.error
    assert Models(ws).active("disease_gene").id == v1.id


def test_only_an_admin_with_a_written_reason_starts_it(two_versions):
    ws, _, v2 = two_versions
    with pytest.raises(PermissionDenied, match="Activating a model version needs the admin "
                                               "role; cur \\(curator\\) may not do it"):
        start_activation(ws, CURATOR, v2.id, "I like it", start=False)
    with pytest.raises(CurationError, match="Activating a model version needs a written reason"):
        start_activation(ws, ADMIN, v2.id, "   ", start=False)
    with pytest.raises(UnknownNameError, match="disease_gene-edel@9"):
        start_activation(ws, ADMIN, "disease_gene-edel@9", "why not", start=False)
    params = {"schema": "disease_gene", "version": v2.id, "reason": "x"}
    with pytest.raises(PermissionDenied, match="kind 'activate' needs the admin role"):
        submit_job(ws, "activate", params, user=CURATOR, start=False)
    with pytest.raises(CurationError, match="is a version of disease_gene, not of 'PO'"):
        submit_job(ws, "activate", {**params, "schema": "PO"}, user=ADMIN, start=False)
    assert list_jobs(ws, "activate") == []


def test_active_entries_name_the_active_version_or_refuse(two_versions):
    """Issue 26 item 2: "dense · active" looked up an index of a model called "active", which
    nothing builds, so the app said "not built" after every activation."""
    ws, v1, _ = two_versions
    assert parse_retriever_choice("dense · active", ws=ws, schema="disease_gene") == (
        "dense", {"model": v1.id})
    assert parse_retriever_choice("hybrid · active", ws=ws, schema="disease_gene") == (
        "hybrid", {"dense": {"model": v1.id}})
    with pytest.raises(CurationError, match="follows a schema's active model version, but no "
                                            "schema was given"):
        parse_retriever_choice("dense · active")
    with pytest.raises(CurationError, match="PO has no active model version"):
        parse_retriever_choice("dense · active", ws=ws, schema="PO")


def test_the_gates_switch_builds_the_hybrid_index_too(two_versions):
    """Issue 26 item 2: switch_active (the gate's switch, same signature) built only the dense
    index, so "hybrid · active" was not built after a promotion."""
    ws, _, v2 = two_versions
    assert switch_active(ws, v2.id, user=ADMIN, reason="gate: better").id == v2.id
    for choice in ("dense · active", "hybrid · active"):
        name, options = parse_retriever_choice(resolve_retriever_choice(ws, "disease_gene",
                                                                        choice))
        assert index_ready(ws, name, options), choice


def test_cli_activate_prints_documents_per_second(two_versions, capsys):
    from curation.cli.main import main

    ws, v1, v2 = two_versions
    common = ["-w", str(ws.root), "-q"]
    assert main(["models", "activate", v2.id, *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"built the index of {v2.id}: {DOCS} documents ({TEXTS} encoded, "
                             "torch/fp32) in ")
    assert out[0].endswith(" documents/s") and out[1] == f"{v2.id} is now the active " \
                                                           "disease_gene model"
    assert Models(ws).active("disease_gene").id == v2.id
    assert main(["models", "promote", v1.id, *common, "--background"]) == 2
    assert "Promoting a model version needs a written reason" in capsys.readouterr().err
    assert main(["models", "promote", v1.id, *common, "--reason", "roll back"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"built the index of {v1.id}: {DOCS} documents ({TEXTS} encoded")
    assert out[1] == f"{v1.id} is now the active disease_gene model (promoted by hand: roll back)"
    assert main(["models", "activate", v2.id, *common]) == 0  # built before: nothing to encode
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"the index of {v2.id} ({DOCS} documents, torch/fp32) was already "
                             "built; ready in ")
    assert list_jobs(ws, "activate") == []


def test_cli_background_activation_prints_the_job(two_versions, capsys):
    from curation.cli.main import main
    from curation.jobs.queue import wait_for_job

    ws, _, v2 = two_versions
    common = ["-w", str(ws.root), "-q"]
    assert main(["models", "activate", v2.id, *common, "--background", "--reason", "x"]) == 0
    (job,) = list_jobs(ws, "activate")
    assert capsys.readouterr().out.startswith(f"activation job {job.id} queued: it builds the "
                                              f"indexes of {v2.id}, then makes it the active")
    done = wait_for_job(ws, job.id, timeout=240)
    assert done.status is JobStatus.DONE, done.error
    assert Models(ws).active("disease_gene").id == v2.id


@pytest.mark.parametrize("choice", ["dense · active", "hybrid · active"])
def test_the_curate_page_searches_with_the_activated_version(tmp_path, monkeypatch,
                                                             tiny_model_path, choice):
    """Issue 26 item 2, in the app: after an activation "dense · active" and "hybrid · active"
    said their index was not built while "dense · V" worked."""
    from app_helpers import APP, add_users, build_app_workspace, sign_in
    from streamlit.testing.v1 import AppTest

    from curation.store.workspace import Workspace

    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    with Workspace.open(root) as ws:
        version = register(ws, tiny_model_path, schema="PO")
        job = start_activation(ws, ADMIN, version.id, "first", start=False)
        assert run_job(ws, job.id).status is JobStatus.DONE
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    at.selectbox(key="retriever").select(choice).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any("index is not built" in i.value for i in at.info)
    hits = [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]
    assert hits
