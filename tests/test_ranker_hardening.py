"""The learned ranker under a red-team pass (issue 35): damaged model files and manifests, a
missing active version, concurrent rounds and saves, an admin's choice during a round, role
checks in the library, schema names with '-', a full disk and orphan folders.

Every test here failed on the code before the fixes (which crashed the process, raised a raw
error, or let the attack through); the item numbers are the issue's.
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from curation.access.users import PermissionDenied, Role, User
from curation.ranking import versions
from curation.ranking.features import feature_names
from curation.ranking.model import Group, Ranker, RankerOptions, fit
from curation.ranking.model_check import check_in_child, check_lightgbm_text
from curation.ranking.versions import (
    active_ranker,
    get_version,
    load_ranker,
    save_version,
    scan_versions,
)
from curation.search.ranked import (
    RANKED_ACTIVE,
    default_for,
    ranked_choices,
    resolve_ranked_choice,
)
from curation.store.import_log import this_host
from curation.store.ranker_versions import RankerVersions, parse_ranker_id
from curation.store.rankers import Rankers, RankingChoice, RoundRunning
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from tests.loop_fixtures import make_loop_workspace
from tests.ranker_fixtures import make_learnable_workspace

ADMIN = User("root", Role.ADMIN)
ANN = User("ann", Role.CURATOR)
SMALL = RankerOptions(n_estimators=20, min_child_samples=1)
TOY = RankerOptions(n_estimators=8, min_child_samples=2, num_leaves=4)
ROOT = Path(__file__).parents[1]


def toy_ranker(kind: str = "lightgbm", seed: int = 0) -> Ranker:
    names = feature_names(("gene",))
    rng = np.random.default_rng(seed)
    groups = []
    for q in range(8):
        x = rng.random((10, len(names)))
        grades = tuple(2 * int(v > 0.5) for v in x[:, names.index("slots_named")])
        if 0 < max(grades) and min(grades) == 0:
            groups.append(Group(f"q{q}", tuple(map(str, range(10))), x, grades))
    return fit(groups, names, RankerOptions(model=kind) if kind != "lightgbm" else TOY)


def saved(ws: Workspace, schema: str = "PO", kind: str = "lightgbm"):
    return save_version(ws, schema, toy_ranker(kind), {"metrics": {}}, actor="root")


def old_style(ws: Workspace, source, ident: str, **changes) -> Path:
    """A copy of ``source`` as the code before issue 35 left it: a folder with manifest.json
    (its own checksum) and no database row."""
    folder = ws.root / "rankers" / ident
    shutil.copytree(source.path, folder)
    manifest = {**json.loads((folder / "manifest.json").read_text()), "id": ident, **changes}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def damage(model: Path) -> None:
    """Point the first split at feature 999 (LightGBM crashes or aborts reading it)."""
    text = model.read_text()
    model.write_text(re.sub(r"split_feature=\d+", "split_feature=999", text, count=1))


# -- item 1: a damaged model never takes the process down ----------------------------------------
LOAD = """
import sys
from curation.ranking.versions import get_version, load_ranker
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
with Workspace.open(sys.argv[1]) as ws:
    try:
        load_ranker(get_version(ws, sys.argv[2]))
    except CurationError as exc:
        print(exc)
        sys.exit(3)
print("loaded")
"""


@pytest.mark.parametrize("registered", [True, False])
def test_a_damaged_model_with_its_new_checksum_in_the_manifest_is_refused(tmp_workspace,
                                                                          registered):
    """The attack: edit model.txt and write its new SHA-256 into manifest.json. The load runs
    in a child here so that the old code's abort (exit 134) fails the test, not the run."""
    v = saved(tmp_workspace)
    folder = v.path if registered else old_style(tmp_workspace, v, "PO-ranker@5")
    damage(folder / "model.txt")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest,
                                                      "sha256": sha(folder / "model.txt")}))
    done = subprocess.run([sys.executable, "-c", LOAD, str(tmp_workspace.root), folder.name],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr[-800:])
    if registered:  # the database's checksum decides, not the file beside the model
        assert "SHA-256 differs from the one recorded in the workspace database" in done.stdout
    else:  # found on disk, registered, then checked before LightGBM reads it
        assert "split_feature must be 0..16" in done.stdout and "model.txt" in done.stdout


@pytest.mark.parametrize(("old", "new", "message"), [
    (r"split_feature=\d+", "split_feature=999", "split_feature must be 0..16"),
    (r"left_child=\d+", "left_child=77", "node 0 has child 77"),
    (r"left_child=\d+", "left_child=0", "node 0 has child 0"),  # a cycle: LightGBM loops
    (r"threshold=[^ \n]+", "threshold=nan", "threshold must hold numbers (no nan)"),
    (r"split_gain=[^ \n]+", "split_gain=inf", "split_gain must hold finite numbers"),
    (r"num_leaves=\d+", "num_leaves=2e9", "num_leaves must be a whole number, got '2e9'"),
    (r"leaf_value=[^ \n]+", "leaf_value=1.5", "tree 0 is not the size tree_sizes says"),
    (r"max_feature_idx=\d+", "max_feature_idx=40", "max_feature_idx must be 16"),
])
def test_the_structure_check_names_what_is_wrong(old, new, message):
    text = toy_ranker().model.booster.model_to_string()
    check_lightgbm_text(text, 17)
    with pytest.raises(CurationError, match=re.escape(message)):
        check_lightgbm_text(re.sub(old, new, text, count=1), 17)


def test_a_split_of_unscored_from_scored_candidates_saves_and_loads(tmp_path):
    """LightGBM writes threshold=inf when it splits the candidates with a missing value (a cross
    score outside the top K) from the scored ones; the check let no such model load, so a ranker
    round with the cross feature failed at promotion (disease_gene, 2026-11-29)."""
    import numpy as np

    from curation.ranking.model import Group, LightGBMModel, RankerOptions, fit

    rng = np.random.default_rng(0)
    groups = []
    for q in range(60):
        grades = (rng.random(30) < 0.3).astype(int)
        cross = np.where((rng.random(30) < 0.5) & (grades == 0), rng.normal(size=30) - 2, np.nan)
        x = np.column_stack([rng.normal(size=30), cross, np.isnan(cross).astype(float)])
        groups.append(Group(f"q{q}", tuple(f"d{q}_{i}" for i in range(30)), x,
                            tuple(int(g) for g in grades)))
    names = ["bm25_score", "cross_score", "cross_missing"]
    ranker = fit(groups, names, RankerOptions())
    text = ranker.model.booster.model_to_string()
    assert re.search(r"threshold=inf", text)  # the split this test is about
    ranker.model.save(tmp_path / "model.txt")
    loaded = LightGBMModel.load(tmp_path / "model.txt", names)
    x = np.vstack([g.features for g in groups[:3]])
    assert np.allclose(loaded.score(x), ranker.model.score(x))
    assert np.all(np.isfinite(loaded.score(x)))


def test_the_child_process_takes_the_crash_and_the_verdict_is_kept(tmp_workspace, monkeypatch):
    from curation.ranking import model_check

    v = saved(tmp_workspace)
    bad = tmp_workspace.root / "bad.txt"
    shutil.copy(v.file, bad)
    damage(bad)
    with pytest.raises(CurationError, match="LightGBM (crashed|aborted)"):
        check_in_child(bad, 17)  # this process lives on
    # a version found on disk is checked in a child once: the verdict is kept in the database
    folder = old_style(tmp_workspace, v, "PO-ranker@4")
    (folder / "model.txt").write_text(toy_ranker(seed=3).model.booster.model_to_string())
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest,
                                                      "sha256": sha(folder / "model.txt")}))
    calls = []
    monkeypatch.setattr(model_check, "check_in_child",
                        lambda path, n: calls.append(path) or None)
    found = get_version(tmp_workspace, "PO-ranker@4")
    assert not found.checked
    load_ranker(found, tmp_workspace)
    load_ranker(get_version(tmp_workspace, "PO-ranker@4"), tmp_workspace)
    assert len(calls) == 1 and RankerVersions(tmp_workspace).get("PO-ranker@4").checked
    load_ranker(v, tmp_workspace)  # saved by this code: checked at saving, no child
    assert len(calls) == 1


def test_a_manifest_may_not_name_a_file_outside_its_folder(tmp_workspace, tmp_path):
    v = saved(tmp_workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(v.file, outside / "model.txt")
    old_style(tmp_workspace, v, "PO-ranker@3", file="../../../outside/model.txt")
    with pytest.raises(CurationError, match=r"'file' must be one of model.txt, model.json"):
        load_ranker(get_version(tmp_workspace, "PO-ranker@3"))
    assert [x.id for x in scan_versions(tmp_workspace, "PO").versions] == ["PO-ranker@1"]


# -- item 2: a missing active version -------------------------------------------------------------
def test_a_missing_active_version_falls_back_with_a_notice_and_a_round_replaces_it(
        tmp_workspace, tmp_path, capsys):
    from curation.cli.main import main
    from curation.training.ranker import train_ranker

    ws = make_learnable_workspace(tmp_workspace)  # the ranker beats bm25+rerank here
    first = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    assert first.activated
    Rankers(ws).set_default_ranking("disease_gene", RankingChoice(
        best="ranked", scores={"bm25": 0.5, "bm25+rerank": 0.6, "ranked": 0.7},
        ranker_version=first.version.id), user=ADMIN)
    assert default_for(ws, "disease_gene").choice == RANKED_ACTIVE
    shutil.move(first.version.path, tmp_path / "moved")
    state = active_ranker(ws, "disease_gene")
    assert state.version is None and "model file model.txt is missing" in state.problem
    fallback = default_for(ws, "disease_gene")
    assert (fallback.choice, fallback.rerank, fallback.configuration) == ("bm25", True,
                                                                          "bm25+rerank")
    assert fallback.notice.startswith("The active ranker disease_gene-ranker@1 of disease_gene "
                                      "cannot be used")
    assert "An admin can activate another version or train a new one" in fallback.notice
    assert RANKED_ACTIVE not in ranked_choices(ws, "disease_gene")
    assert main(["rank", "list", "-w", str(ws.root)]) == 0
    assert "warning: The active ranker disease_gene-ranker@1" in capsys.readouterr().out
    with pytest.raises(CurationError, match="No ranker version disease_gene-ranker@9 of "
                                            "disease_gene is saved"):
        Rankers(ws).set_active("disease_gene", "disease_gene-ranker@9", user=ADMIN)
    second = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    # the same model as @1, but @1 cannot be used: saved anew, and it beats bm25+rerank
    assert second.activated and second.identical_to is None
    assert second.decision.reasons[0].startswith("the active version disease_gene-ranker@1 "
                                                 "cannot be used")
    assert active_ranker(ws, "disease_gene").version.id == "disease_gene-ranker@2"


# -- item 4: one round per schema, numbers from the database --------------------------------------
def test_a_save_between_another_saves_number_and_rename_gets_its_own_number(tmp_workspace,
                                                                              monkeypatch):
    """The race behind 'Directory not empty': a second process saves while the first is
    between choosing its number and renaming its folder."""
    real = versions.utcnow
    nested = []

    def now() -> str:
        if not nested:
            nested.append(True)
            with Workspace.open(tmp_workspace.root) as other:
                nested.append(save_version(other, "PO", toy_ranker("logistic"), {},
                                           actor="bob").id)
        return real()

    monkeypatch.setattr(versions, "utcnow", now)
    first = save_version(tmp_workspace, "PO", toy_ranker(), {}, actor="ann")
    assert (first.id, nested[1]) == ("PO-ranker@1", "PO-ranker@2")
    assert [v.id for v in scan_versions(tmp_workspace, "PO").versions] == ["PO-ranker@1",
                                                                           "PO-ranker@2"]


def test_three_threads_saving_at_once_get_distinct_versions(tmp_workspace):
    errors, made = [], []

    def work(i: int) -> None:
        try:
            with Workspace.open(tmp_workspace.root) as ws:
                for _ in range(4):
                    made.append(save_version(ws, "PO", toy_ranker("logistic", i), {},
                                             actor=f"u{i}").number)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(made) == list(range(1, 13))
    assert len(scan_versions(tmp_workspace, "PO").versions) == 12


def test_one_round_per_schema_is_enforced_in_the_database(tmp_workspace, capsys):
    from curation.cli.main import main
    from curation.jobs.queue import JobStatus, run_job, submit_job
    from curation.training.ranker import train_ranker

    ws = make_loop_workspace(tmp_workspace)
    with Workspace.open(ws.root) as other:  # a round of another process runs now
        held = Rankers(other).begin_round("disease_gene", started_by="bob")
        with pytest.raises(RoundRunning, match="A ranker round of disease_gene is already "
                                               "running .*started .* by bob"):
            train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
        assert main(["rank", "train", "-w", str(ws.root), "--schema", "disease_gene",
                     "--quiet"]) == 2
        assert "already running" in capsys.readouterr().err
        job = submit_job(ws, "rank", {"schema": "disease_gene", "labels": 20}, user=ADMIN,
                         start=False)
        done = run_job(ws, job.id)
        assert done.status is JobStatus.DONE and "already running" in done.result["skipped"]
        assert RankerVersions(ws).saved() == []
        Rankers(other).end_round(held)
    # a lock left by a process that is gone is taken over
    gone = subprocess.Popen(["true"])
    gone.wait()
    with ws.transaction():
        ws.conn.execute("INSERT INTO ranker_rounds(schema, token, started_at, started_by, pid, "
                        "host) VALUES ('disease_gene', 'x', '2026-01-01T00:00:00+00:00', 'bob', "
                        "?, ?)", (gone.pid, this_host()))
    assert train_ranker(ws, "disease_gene", user=ADMIN, progress=False,
                        options=SMALL).version.id == "disease_gene-ranker@1"
    assert Rankers(ws).running_round("disease_gene") is None


# -- item 5: an admin's choice during a round stands ----------------------------------------------
def test_a_round_never_undoes_an_activation_made_while_it_ran(tmp_workspace, monkeypatch):
    from curation.training import ranker as rounds
    from curation.training.ranker import promote_ranker, train_ranker

    ws = make_learnable_workspace(tmp_workspace)  # the ranker beats bm25+rerank here
    first = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    assert first.activated
    train_ranker(ws, "disease_gene", user=ADMIN, progress=False, gate=False,
                 options=RankerOptions(n_estimators=20, min_child_samples=1, seed=14))
    easy = {qid: {"ndcg@10": 0.0, "entity_recall@10": 0.0}  # @1 easy to beat
            for qid in first.version.manifest["heldout_per_query"]}
    versions.update_manifest(ws, first.version.id, {"heldout_per_query": easy})
    real = rounds.saving_version

    def admin_acts_then_save(*args, **kwargs):
        with Workspace.open(ws.root) as other:  # the admin, milliseconds before the save
            promote_ranker(other, "disease_gene-ranker@2", user=ADMIN, reason="the better one")
        return real(*args, **kwargs)  # the save and the promotion are one transaction

    monkeypatch.setattr(rounds, "saving_version", admin_acts_then_save)
    third = train_ranker(ws, "disease_gene", user=ADMIN, progress=False,
                         options=RankerOptions(n_estimators=20, min_child_samples=1, seed=15))
    assert not third.activated and not third.decision.promote
    assert third.decision.reasons[-1].startswith("not activated: disease_gene-ranker@2 was "
                                                 "made active while this round ran (it started "
                                                 "from disease_gene-ranker@1)")
    assert Rankers(ws).active("disease_gene") == "disease_gene-ranker@2"
    gate = get_version(ws, third.version.id).manifest["gate"]
    assert gate["activated"] is False and gate["reasons"] == list(third.decision.reasons)


# -- item 7: roles checked in the library ---------------------------------------------------------
def test_store_settings_and_rounds_need_an_admin(tmp_workspace):
    from curation.jobs.queue import submit_job
    from curation.training.ranker import train_ranker

    ws = make_loop_workspace(tmp_workspace)
    v = saved(ws, "disease_gene")
    rankers = Rankers(ws)
    choice = RankingChoice(best="bm25", scores={"bm25": 0.5})
    for who in (ANN, "ann", None):
        with pytest.raises(PermissionDenied, match="needs the admin role"):
            rankers.set_active("disease_gene", v.id, user=who)
        with pytest.raises(PermissionDenied, match="needs the admin role"):
            rankers.set_retrain_every(3, user=who)
        with pytest.raises(PermissionDenied, match="needs the admin role"):
            rankers.set_default_ranking("disease_gene", choice, user=who)
    with pytest.raises(PermissionDenied, match="Starting a job of kind 'rank' needs the admin"):
        submit_job(ws, "rank", {"schema": "disease_gene"}, user=ANN, start=False)
    with pytest.raises(PermissionDenied, match="Training a ranker version needs the admin"):
        train_ranker(ws, "disease_gene", user=ANN, progress=False)
    with pytest.raises(CurationError, match="No schema 'nope'"):
        rankers.set_default_ranking("nope", choice, user=ADMIN)
    assert (rankers.active("disease_gene"), rankers.retrain_every()) == (None, 20)
    assert rankers.set_active("disease_gene", v.id, user=ADMIN)


# -- item 8: schema names with '-' ----------------------------------------------------------------
def test_a_schema_named_with_a_dash_gets_ranker_versions(tmp_workspace, tmp_path, capsys):
    from curation.cli.main import main

    toml = (ROOT / "assets" / "schemas" / "disease_gene.toml").read_text(encoding="utf-8")
    path = tmp_path / "dg-copy.toml"
    path.write_text(re.sub(r'(?m)^name\s*=.*$', 'name = "dg-copy"', toml, count=1))
    tmp_workspace.add_schema(path)
    first = saved(tmp_workspace, "dg-copy")
    second = saved(tmp_workspace, "dg-copy", "logistic")
    assert (first.id, second.id) == ("dg-copy-ranker@1", "dg-copy-ranker@2")
    assert (first.schema, second.number) == ("dg-copy", 2)
    versions.activate(tmp_workspace, second.id, user=ADMIN, reason="dash")
    assert active_ranker(tmp_workspace, "dg-copy").version.id == "dg-copy-ranker@2"
    assert ranked_choices(tmp_workspace, "dg-copy") == [
        RANKED_ACTIVE, "ranked · dg-copy-ranker@2", "ranked · dg-copy-ranker@1"]
    assert resolve_ranked_choice(tmp_workspace, "dg-copy", RANKED_ACTIVE).id == second.id
    assert main(["rank", "list", "-w", str(tmp_workspace.root)]) == 0
    assert re.search(r"dg-copy-ranker@2\s+active", capsys.readouterr().out)
    # the one grammar: any valid schema name, read by the last '-ranker@'
    for name in ("a", "dg-copy", "x-ranker", "A_b-9"):
        assert parse_ranker_id(f"{name}-ranker@12") == (name, 12)
    assert parse_ranker_id("dg copy-ranker@1") is None and parse_ranker_id("dg-ranker@0") is None
    bad = tmp_path / "bad.toml"
    bad.write_text(toml.replace('name = "disease_gene"', 'name = "dg.copy"'))
    with pytest.raises(CurationError, match="must be 1-64 ASCII letters, digits, '_' or '-'"):
        tmp_workspace.add_schema(bad)


def test_a_dash_schema_folder_left_by_the_old_code_is_registered(tmp_workspace):
    v = saved(tmp_workspace)
    folder = old_style(tmp_workspace, v, "dg-copy-ranker@1", schema="dg-copy")
    assert [x.id for x in scan_versions(tmp_workspace, "dg-copy").versions] == [folder.name]
    assert saved(tmp_workspace, "dg-copy").id == "dg-copy-ranker@2"


# -- item 9: damaged manifests are one line each, the rest keeps working ---------------------------
@pytest.mark.parametrize(("content", "message"), [
    ("[]", "not a ranker manifest (expected a JSON object, got list)"),
    ('{"kind": "lightgbm", "features": ["a"], "file": "model.txt", "metrics": []}',
     "'metrics' must be an object of splits"),
    ('{"kind": "lightgbm", "features": ["a"], "file": "model.txt", "depth": "abc"}',
     "'depth' must be a positive whole number"),
    ("{not json", "not JSON"),
])
def test_a_damaged_manifest_is_one_line_naming_it(tmp_workspace, capsys, content, message):
    from curation.cli.main import main

    v = saved(tmp_workspace)
    folder = old_style(tmp_workspace, v, "PO-ranker@2")
    (folder / "manifest.json").write_text(content)
    found = scan_versions(tmp_workspace, "PO")
    assert [x.id for x in found.versions] == ["PO-ranker@1"]
    assert len(found.problems) == 1 and message in found.problems[0]
    assert str(folder / "manifest.json") in found.problems[0]
    assert main(["rank", "list", "-w", str(tmp_workspace.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PO-ranker@1") and f"warning: skipped: {folder}" in out
    assert main(["rank", "activate", "-w", str(tmp_workspace.root), "PO-ranker@2",
                 "--reason", "try"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_damaged_record_in_the_database_or_logistic_model_is_one_line(tmp_workspace):
    v = saved(tmp_workspace)
    logistic = saved(tmp_workspace, kind="logistic")
    RankerVersions(tmp_workspace).set_manifest(v.id, {**v.manifest, "metrics": []},
                                               actor="root")
    found = scan_versions(tmp_workspace, "PO")
    assert [x.id for x in found.versions] == [logistic.id]
    assert found.problems == (f"the manifest of {v.id} in the workspace database: not a valid "
                              "ranker manifest: 'metrics' must be an object of splits, each an "
                              "object of numbers, got []; the version is damaged: restore the "
                              "file or train a new version",)
    for number, content in ((8, "[]"), (9, '{"names": []}')):
        folder = old_style(tmp_workspace, logistic, f"PO-ranker@{number}")
        (folder / "model.json").write_text(content)
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps(
            {**manifest, "sha256": sha(folder / "model.json")}))
        with pytest.raises(CurationError, match=re.escape(str(folder / "model.json")) +
                           ": (not a ranker JSON model|its features differ)"):
            load_ranker(get_version(tmp_workspace, folder.name))


# -- issue 42 item 10: a manifest nested 100,000 deep ---------------------------------------------
NESTED = "[" * 100_000
NESTED_PROBLEM = ("JSON arrays/objects are nested too deeply to parse. Expected a ranker manifest "
                  "(a JSON object of a few levels). Fix: the ranker version is damaged: restore "
                  "its manifest, or remove its folder (in rankers/) and re-run the round "
                  "(kbcurate rank train)")


def test_a_deeply_nested_manifest_on_disk_or_in_the_database_is_one_line(tmp_workspace, capsys):
    from curation.cli.main import main

    first = saved(tmp_workspace)
    stray = old_style(tmp_workspace, first, "PO-ranker@5")
    (stray / "manifest.json").write_text(NESTED)
    second = saved(tmp_workspace, kind="logistic")
    Rankers(tmp_workspace).set_active("PO", second.id, user=ADMIN)
    with tmp_workspace.transaction():
        tmp_workspace.conn.execute("UPDATE ranker_versions SET manifest = ? WHERE ident = ?",
                                   (NESTED, second.id))
    found = scan_versions(tmp_workspace, "PO")
    assert [v.id for v in found.versions] == [first.id]
    assert sorted(found.problems) == sorted([
        f"{stray / 'manifest.json'}: {NESTED_PROBLEM}",
        f"the manifest of {second.id} in the workspace database: {NESTED_PROBLEM}"])
    state = active_ranker(tmp_workspace, "PO")
    assert state.version is None and state.problem == found.problems[-1]
    assert main(["rank", "list", "-w", str(tmp_workspace.root)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and out.startswith(first.id)
    assert f"warning: skipped: {stray / 'manifest.json'}: {NESTED_PROBLEM}\n" in out
    assert main(["rank", "activate", "-w", str(tmp_workspace.root), "PO-ranker@5",
                 "--reason", "try"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {stray / 'manifest.json'}: {NESTED_PROBLEM}\n"


def test_a_deeply_nested_logistic_model_or_stored_measurement_is_refused(tmp_workspace, caplog):
    logistic = saved(tmp_workspace, kind="logistic")
    folder = old_style(tmp_workspace, logistic, "PO-ranker@9")
    (folder / "model.json").write_text(NESTED)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(
        {**manifest, "sha256": sha(folder / "model.json")}))
    with pytest.raises(CurationError) as caught:
        load_ranker(get_version(tmp_workspace, folder.name))
    assert str(caught.value) == (
        f"{folder / 'model.json'}: JSON arrays/objects are nested too deeply to parse. Expected "
        "a ranker JSON model (an object with names, coef, intercept, mean and scale). Fix: the "
        "version is damaged, train a new one")
    with tmp_workspace.transaction():  # the stored measurement behind the default ranking
        tmp_workspace.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                                   ("ranking.default.PO", NESTED))
    assert Rankers(tmp_workspace).default_ranking("PO") is None
    assert "nested too deeply" in caplog.text


# -- item 10: a full disk during a round ----------------------------------------------------------
def test_a_full_disk_while_saving_says_so_and_leaves_nothing(tmp_workspace, monkeypatch, capsys):
    import lightgbm

    from curation.cli.main import main

    ws = make_loop_workspace(tmp_workspace)
    real = Path.write_text

    def full(self: Path, *args, **kwargs):
        if self.name in ("model.txt", "model.json") and "rankers" in self.parts:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    def lightgbm_full(self, filename, *args, **kwargs):  # what LightGBM's own writer raises
        raise lightgbm.basic.LightGBMError("Cannot write binary data ... wrote 172032 of "
                                           "356491 bytes")

    monkeypatch.setattr(Path, "write_text", full)
    monkeypatch.setattr(lightgbm.Booster, "save_model", lightgbm_full)
    assert main(["rank", "train", "-w", str(ws.root), "--schema", "disease_gene",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Disk full" in err and "Free space in" in err and "Nothing was saved" in err
    assert len(err.strip().splitlines()) == 1
    assert [p.name for p in (ws.root / "rankers").iterdir()] == []
    assert RankerVersions(ws).saving() == [] and RankerVersions(ws).saved() == []
    assert Rankers(ws).running_round("disease_gene") is None  # the lock was released


# -- issue 42 item 11: a full disk while the gate records its verdict ----------------------------
def _verdict_disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _verdict_db_full(*args, **kwargs):
    raise sqlite3.OperationalError("database or disk is full")


def _verdict_db_full_translated(self, *args, **kwargs):  # as the workspace connection raises it
    raise self.ws.conn.translate(sqlite3.OperationalError("database or disk is full"))


SAVE_FAILED = "Cannot save a ranker version of disease_gene into {root}/rankers: "
NOT_SAVED = ". Nothing was saved; the active ranker version still ranks"
DB_FULL = ("Disk full: the workspace {root} cannot grow (database or disk is full). Free space in "
           "{root} (or on its disk) and retry; the unfinished change was not saved")


@pytest.mark.parametrize("target, fail, message", [
    ("curation.training.gate.update_manifest", _verdict_disk_full,
     SAVE_FAILED + "Disk full (No space left on device). Free space in {root} (or on its disk) "
     "and retry; the unfinished step was not saved" + NOT_SAVED),
    ("curation.store.ranker_versions.RankerVersions.set_manifest", _verdict_db_full,
     SAVE_FAILED + DB_FULL + NOT_SAVED),
    ("curation.store.ranker_versions.RankerVersions.set_manifest", _verdict_db_full_translated,
     DB_FULL),
])
def test_a_round_whose_verdict_cannot_be_recorded_leaves_no_version(tmp_workspace, monkeypatch,
                                                                    capsys, target, fail,
                                                                    message):
    """The version row, its folder, the promotion and the gate's verdict commit together: a
    full disk while recording the verdict left ``@2`` saved without one."""
    from curation.cli.main import main
    from curation.training.ranker import train_ranker
    from curation.training.round_history import last_rounds

    ws = make_learnable_workspace(tmp_workspace)
    first = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    assert first.activated and first.version.id == "disease_gene-ranker@1"
    monkeypatch.setattr(target, fail)
    assert main(["rank", "train", "-w", str(ws.root), "--schema", "disease_gene", "--model",
                 "logistic", "--quiet"]) == 2
    err = capsys.readouterr().err
    root = ws.root
    assert [r.ident for r in RankerVersions(ws).saved()] == ["disease_gene-ranker@1"]
    assert RankerVersions(ws).saving() == []
    assert [p.name for p in (root / "rankers").iterdir()] == ["disease_gene-ranker@1"]
    assert Rankers(ws).active("disease_gene") == "disease_gene-ranker@1"
    assert last_rounds(ws, "disease_gene", 1)[0].outcome == "failed"
    assert err == f"error: {message.format(root=root)}\n"
    monkeypatch.undo()
    assert main(["rank", "list", "-w", str(root)]) == 0
    assert "ranker@2" not in capsys.readouterr().out


# -- item 13: orphan folders of killed rounds -----------------------------------------------------
def test_the_next_round_removes_orphan_folders_but_not_a_live_save(tmp_workspace):
    from curation.training.ranker import train_ranker

    ws = make_loop_workspace(tmp_workspace)
    root = ws.root / "rankers"
    gone = subprocess.Popen(["true"])
    gone.wait()
    store = RankerVersions(ws)
    store.allocate("disease_gene", created_by="bob", tmp=".tmp-live")  # this process: alive
    dead = store.allocate("disease_gene", created_by="bob", tmp=".tmp-dead")
    with ws.transaction():
        ws.conn.execute("UPDATE ranker_versions SET pid = ? WHERE ident = ?", (gone.pid, dead))
    for name in (".tmp-live", ".tmp-dead", ".tmp-0123abcd"):  # the last: the old code's orphan
        (root / name).mkdir(parents=True)
        (root / name / "model.txt").write_text("tree\n")
    result = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    assert sorted(p.name for p in root.iterdir()) == [".tmp-live", result.version.id]
    assert [r.tmp for r in store.saving()] == [".tmp-live"]
    # the live save holds @1; the dead one's @2 was given back with its row
    assert result.version.id == "disease_gene-ranker@2"


# -- the CLI: activate takes a reason, evaluate --out writes JSON ----------------------------------
def test_cli_activate_needs_a_reason_and_audits_it(tmp_workspace, capsys):
    from curation.cli.main import main

    first, second = saved(tmp_workspace), saved(tmp_workspace, kind="logistic")
    with pytest.raises(SystemExit):
        main(["rank", "activate", "-w", str(tmp_workspace.root), second.id])
    assert "--reason" in capsys.readouterr().err
    assert main(["rank", "activate", "-w", str(tmp_workspace.root), second.id, "--reason",
                 " "]) == 2
    assert "Say why" in capsys.readouterr().err
    assert main(["rank", "activate", "-w", str(tmp_workspace.root), first.id, "--reason",
                 "rollback to the tree model"]) == 0
    entry = tmp_workspace.audit_log("ranker")[0]
    assert (entry.actor, entry.action, entry.object_id) == ("cli", "activate", first.id)
    assert entry.after_value()["reason"] == "rollback to the tree model"


def test_evaluate_best_writes_its_json_report(tmp_workspace, tmp_path):
    from curation.cli.main import main

    ws = make_loop_workspace(tmp_workspace)
    out = tmp_path / "best.json"
    assert main(["evaluate", "-w", str(ws.root), "--schema", "disease_gene", "--retriever",
                 "best", "--quiet", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    record = Rankers(ws).default_ranking("disease_gene")
    assert report["default"] == record.to_json() and report["default"]["by"] == "cli"
    assert report["default"]["best"] in ("bm25", "bm25+rerank")
    assert set(report["default"]["scores"]) == {"bm25", "bm25+rerank"}
