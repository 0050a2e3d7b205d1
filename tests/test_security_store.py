"""Issue 28, security third pass: model files, workspace files and read-only workspaces."""

from __future__ import annotations

import pickle
import subprocess

import pytest

from curation.access.users import Role, User
from curation.jobs.queue import JobStatus, get_job, submit_job
from curation.store.labels import Labels
from curation.store.models import Models
from curation.training import imports
from kb_sources.errors import CurationError
from tests.loop_fixtures import make_loop_workspace

ADMIN = User("root", Role.ADMIN)


def _never_load(*args, **kwargs):
    raise AssertionError("the checkpoint was loaded before its files were checked")


@pytest.fixture
def no_loading(monkeypatch):
    import retrievers.encoder

    monkeypatch.setattr(retrievers.encoder, "load_sentence_transformer", _never_load)


# -- item 5: pickle checkpoints are refused before anything loads them --------------------------
@pytest.mark.parametrize(("name", "content"), [
    ("pytorch_model.bin", pickle.dumps({"weights": [1, 2, 3]}, protocol=2)),
    ("model.ckpt", pickle.dumps([0.5], protocol=4)),
    ("weights.pth", b"PK\x03\x04archive/data.pkl"),  # torch's zip format
    ("model.safetensors", pickle.dumps({"x": 1}, protocol=5)),  # pickle under another name
])
def test_import_refuses_pickle_files_before_loading(tmp_workspace, tmp_path, no_loading,
                                                    name, content):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / name).write_bytes(content)
    with pytest.raises(CurationError, match=rf"{name}.*pickle.*safetensors") as caught:
        imports.import_checkpoint(tmp_workspace, str(folder), schema="PO", actor="admin")
    assert "save_pretrained(..., safe_serialization=True)" in str(caught.value)
    assert tmp_workspace.conn.execute("SELECT COUNT(*) FROM models").fetchone()[0] == 0


# -- item 13: oversized config and tokenizer files are refused ---------------------------------
@pytest.mark.parametrize(("name", "size", "limit"), [
    ("config.json", 2 * 1024 * 1024, "1 MiB"),
    ("1_Pooling/config.json", 2 * 1024 * 1024, "1 MiB"),
    ("tokenizer.json", 65 * 1024 * 1024, "64 MiB"),
    ("vocab.txt", 65 * 1024 * 1024, "64 MiB"),
])
def test_import_refuses_oversized_config_and_tokenizer(tmp_workspace, tmp_path, no_loading,
                                                       name, size, limit):
    folder = tmp_path / "big"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    with open(folder / name, "wb") as fh:  # sparse: the size without the disk use
        fh.truncate(size)
    with pytest.raises(CurationError, match=rf"{name} is {size / 2**20:.1f} MiB.*limit {limit}"):
        imports.import_checkpoint(tmp_workspace, str(folder), schema="PO", actor="admin")


# -- item 6: index manifests name a checked registry version or the packaged model -----------------
def _version_index(ws, tiny_model_path):
    from curation.search.indexing import get_index, index_folder, with_workspace_defaults

    make_loop_workspace(ws)
    version = Models(ws).register(schema="disease_gene", recipe="edel", base_model="tiny",
                                  model_dir=tiny_model_path, manifest={}, created_by="admin")
    get_index(ws, "dense", {"model": version.id}, progress=False)
    folder = index_folder(ws, "dense", with_workspace_defaults(ws, "dense",
                                                               {"model": version.id}))
    return version, folder


def test_an_edited_index_manifest_cannot_load_another_model(tmp_workspace, tiny_model_path):
    import json

    from curation.search.indexing import get_index

    version, folder = _version_index(tmp_workspace, tiny_model_path)
    manifest = folder / "retriever.json"
    data = json.loads(manifest.read_text())
    assert data["encoder"]["model"] == str(version.model_dir)
    data["encoder"]["model"] = str(tiny_model_path)  # a model outside the workspace
    manifest.write_text(json.dumps(data))
    with pytest.raises(CurationError, match=rf"Index manifest {manifest} names the encoder "
                       rf"model '{tiny_model_path}', which is neither a model version"):
        get_index(tmp_workspace, "dense", {"model": version.id}, progress=False)


def test_an_index_of_a_tampered_version_is_refused_by_checksum(tmp_workspace, tiny_model_path):
    from curation.store.index_models import check_index_models

    version, folder = _version_index(tmp_workspace, tiny_model_path)
    check_index_models(tmp_workspace, folder)  # intact: accepted
    with open(version.model_dir / "model.safetensors", "r+b") as fh:
        fh.seek(200)
        fh.write(b"\x01\x02\x03")
    with pytest.raises(CurationError, match="do not match the checksum recorded at training"):
        check_index_models(tmp_workspace, folder)


def test_an_index_of_a_requested_folder_still_loads(tmp_workspace, tiny_model_path):
    from curation.search.indexing import get_index

    make_loop_workspace(tmp_workspace)
    options = {"model": str(tiny_model_path)}  # what kbcurate index --model FOLDER asks for
    built = get_index(tmp_workspace, "dense", options, progress=False)
    loaded = get_index(tmp_workspace, "dense", options, progress=False)
    assert loaded.doc_ids == built.doc_ids and len(built.doc_ids) > 10


# -- item 9: a read-only workspace gives the read-only message, never an OSError traceback ---------
@pytest.fixture
def read_only_mount(tmp_path):
    """A workspace and a read-only bind mount of it (needs mount rights: root in CI's container)."""
    import shutil
    import subprocess

    from curation.store.workspace import Workspace

    with Workspace.init(tmp_path / "ws") as ws:
        make_loop_workspace(ws)  # documents and relations, so evaluate gets to its writes
    (tmp_path / "model").mkdir()
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(tmp_path / "ws"), str(mount)],
                          capture_output=True, check=False) if shutil.which("mount") else None
    if done is None or done.returncode != 0:
        pytest.skip("cannot bind-mount read-only here (needs root); "
                    "test_an_os_error_from_a_command_is_one_line covers the message")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("argv", [
    ["index", "--retriever", "bm25", "-q"],
    ["evaluate", "--schema", "disease_gene", "--retriever", "bm25", "-q"],
    ["models", "import", "{model}", "--schema", "PO"],
    ["users", "add", "alice", "--password-stdin"],
])
def test_read_only_workspace_commands_say_read_only(read_only_mount, monkeypatch, capsys, argv):
    import io

    from curation.cli.main import main

    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-password-1234\n"))
    model = str(read_only_mount.parent / "model")
    argv = [a.replace("{model}", model) for a in argv]
    code = main([*argv, "-w", str(read_only_mount)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: The workspace {read_only_mount} is read-only")
    assert "Read-only file system" in err and "Traceback" not in err


def test_an_os_error_from_a_command_is_one_line(tmp_workspace, monkeypatch, capsys):
    import errno

    from curation.cli import commands
    from curation.cli.main import main

    def write_fails(args):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_workspace.root / "users.tmp"))

    monkeypatch.setattr(commands, "cmd_users", write_fails)
    assert main(["users", "list", "-w", str(tmp_workspace.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: The workspace {tmp_workspace.root} is read-only "
                          f"({tmp_workspace.root / 'users.tmp'}: Read-only file system)")


# -- item 10: an emptied database beside indexes, models or spooled labels is an error -------------
@pytest.mark.parametrize("leftover", ["indexes/bm25-0123456789/retriever.json",
                                      "models/PO-edel@1/manifest.json", "pending_labels.jsonl",
                                      # issue 35 item 12: any workspace content is evidence
                                      "rankers/PO-ranker@1/manifest.json", "grades/PO.toml",
                                      "users.toml", "exports/labels.csv"])
def test_an_emptied_database_is_not_a_new_workspace(tmp_path, leftover):
    from curation.store.workspace import DB_NAME, Workspace, WorkspaceError

    Workspace.init(tmp_path / "ws").close()
    (tmp_path / "ws" / leftover).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / leftover).write_text("{}\n")
    (tmp_path / "ws" / DB_NAME).write_bytes(b"")  # : > WS/workspace.sqlite
    name = leftover.split("/")[0]
    with pytest.raises(WorkspaceError, match=rf"{DB_NAME} in {tmp_path / 'ws'} is empty but the "
                       rf"folder holds {name}"):
        Workspace.open(tmp_path / "ws")
    assert (tmp_path / "ws" / DB_NAME).stat().st_size == 0  # nothing was written into it
    with pytest.raises(WorkspaceError, match="Restore workspace.sqlite from a backup"):
        Workspace.init(tmp_path / "ws")


def test_an_emptied_database_of_an_unused_workspace_opens(tmp_path):
    from curation.store.workspace import DB_NAME, Workspace

    Workspace.init(tmp_path / "ws").close()
    (tmp_path / "ws" / DB_NAME).write_bytes(b"")
    with Workspace.open(tmp_path / "ws") as ws:  # nothing to lose: a fresh database
        assert ws.stats().documents == 0


# -- issue 35 item 11: the database is owner-only unless the admin asks for group access ---------
def _modes(root):
    import os

    return {p.name: oct(os.stat(p).st_mode & 0o7777) for p in sorted(root.iterdir())
            if p.name.startswith("workspace.sqlite")}


def test_a_new_workspace_is_owner_only(tmp_path):
    from curation.store.labels import Labels
    from curation.store.workspace import Workspace

    with Workspace.init(tmp_path / "ws") as ws:
        Labels(ws).record(user="ann", schema="PO", query_key="q", query_text="q", doc_id="1",
                          grade="partial", note="private")
        assert _modes(ws.root) == {"workspace.sqlite": "0o600", "workspace.sqlite-shm": "0o600",
                                   "workspace.sqlite-wal": "0o600"}
        assert oct((tmp_path / "ws").stat().st_mode & 0o7777) == "0o700"


def test_group_access_on_request(tmp_path):
    from curation.cli.main import main

    assert main(["init", str(tmp_path / "team"), "--group-access"]) == 0
    assert oct((tmp_path / "team").stat().st_mode & 0o7777) == "0o2770"
    assert _modes(tmp_path / "team")["workspace.sqlite"] == "0o660"


def test_an_old_world_readable_database_is_restricted_on_open(tmp_path):
    import os

    from curation.store.workspace import Workspace

    Workspace.init(tmp_path / "ws").close()
    for name in _modes(tmp_path / "ws"):
        os.chmod(tmp_path / "ws" / name, 0o644)  # as kbcurate before issue 35 made them
    with Workspace.open(tmp_path / "ws"):
        assert set(_modes(tmp_path / "ws").values()) == {"0o600"}


# -- item 7: symbolic links in the workspace are never followed ------------------------------------
def _secret(tmp_path, text="SECRET-LINE not json\n"):
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text(text)
    secret.chmod(0o600)
    return secret


def test_a_linked_label_spool_is_refused_and_never_copied(tmp_workspace, tmp_path):
    from curation.store.labels import OUTBOX_NAME
    from curation.store.safe_files import LinkRefusedError

    secret = _secret(tmp_path)
    spool = tmp_workspace.root / OUTBOX_NAME
    spool.symlink_to(secret)
    with pytest.raises(LinkRefusedError, match=rf"{spool} is a symbolic link; kbcurate never "
                       "follows links"):
        Labels(tmp_workspace).pending()
    assert not spool.with_name(OUTBOX_NAME + ".unreadable").exists()
    assert secret.read_text() == "SECRET-LINE not json\n"


def test_a_dangling_spool_link_writes_nothing_outside(tmp_workspace, tmp_path):
    from curation.store.labels import OUTBOX_NAME
    from curation.store.outbox import Outbox
    from curation.store.safe_files import LinkRefusedError

    target = tmp_path / "outside" / "created-by-kbcurate.jsonl"
    target.parent.mkdir()
    spool = tmp_workspace.root / OUTBOX_NAME
    spool.symlink_to(target)
    box = Outbox(spool)
    with box.locked(), pytest.raises(LinkRefusedError, match="is a symbolic link"):
        box.append({"pmid": "1"})
    assert not target.exists()


def test_spooled_labels_are_private(tmp_workspace):
    from curation.store.labels import OUTBOX_NAME
    from curation.store.outbox import Outbox

    box = Outbox(tmp_workspace.root / OUTBOX_NAME)
    with box.locked():
        box.append({"pmid": "1"})
        box.set_aside(["torn line"])
    assert (box.path.stat().st_mode & 0o777) == 0o600
    assert (box.unreadable_path.stat().st_mode & 0o777) == 0o600


def test_a_linked_job_log_leaks_nothing_into_the_job_error(tmp_workspace, tmp_path):
    from curation.jobs.queues import log_path

    secret = _secret(tmp_path, "api_key=hunter2\n")
    job = submit_job(tmp_workspace, "selftest", {"steps": 1}, user=ADMIN, start=False)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with tmp_workspace.transaction():
        tmp_workspace.conn.execute("UPDATE jobs SET status = 'running', pid = ? WHERE id = ?",
                                   (dead.pid, job.id))
    log_path(tmp_workspace, job.id).symlink_to(secret)
    failed = get_job(tmp_workspace, job.id)
    assert failed.status is JobStatus.FAILED
    assert "hunter2" not in failed.error
    assert failed.error.startswith(f"the worker process (pid {dead.pid}) stopped unexpectedly; "
                                   "see ")


def test_a_linked_users_tmp_is_not_written_through(tmp_workspace, tmp_path):
    from curation.access.users import USERS_FILE, UserStore

    victim = _secret(tmp_path, "do not overwrite\n")
    store = UserStore(tmp_workspace.root / USERS_FILE)
    (store.path.with_suffix(".tmp")).symlink_to(victim)
    store.add("alice", "a-long-password-1234", "curator")
    assert victim.read_text() == "do not overwrite\n"
    assert [u.name for u in store.users()] == ["alice"]
    assert (store.path.stat().st_mode & 0o777) == 0o600
