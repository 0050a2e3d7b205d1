"""The canary: the newest versions pyproject.toml allows, installed in a scratch venv, still pass
the LoRA, training and encoder tests. Not in the default run (it installs from the registry for
minutes); run it on purpose, before refreshing the lock or raising an upper bound:

    python -m pytest -q -m canary            # prints what drifted from constraints.txt

It resolves like a user installing without the lock (only the hand pins of
constraints-base.txt: torch's CPU wheel, numpy<2, pyarrow<26), so the next incompatible release
is seen here before a user sees it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.test_install_lock import parse_lock

REPO = Path(__file__).resolve().parents[1]
# LoRA (BioHiCL), the training engine and recipes, the encoder and its backends
CANARY_TESTS = ("tests/test_biohicl.py", "tests/test_recipe_rounds.py",
                "tests/test_training_engine.py", "tests/test_training_edel.py",
                "tests/test_bica.py", "tests/test_dense.py", "tests/test_backends.py")


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)


def drift(lock: dict[str, Version], freeze: str) -> list[str]:
    """``name lock -> now`` for each pinned distribution whose newest allowed version differs,
    plus ``name (new) now`` for distributions the lock does not have."""
    changes = []
    for line in freeze.splitlines():
        if "==" not in line:
            continue
        name, version = line.split("==", 1)
        name, now = canonicalize_name(name), Version(Version(version).public)
        if name == "kbcurate":
            continue
        if name not in lock:
            changes.append(f"{name} (new) {now}")
        elif lock[name] != now:
            changes.append(f"{name} {lock[name]} -> {now}")
    return changes


def test_drift_lists_changed_and_new_pins():
    lock = {"torch": Version("2.13.0"), "peft": Version("0.21.2")}
    assert drift(lock, "torch==2.13.0+cpu\npeft==0.22.0\nlightgbm==4.7.0\nkbcurate==0.1.0\n") == [
        "peft 0.21.2 -> 0.22.0", "lightgbm (new) 4.7.0"]


@pytest.mark.canary
def test_newest_allowed_versions_pass_the_ml_tests(tmp_path):
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    python = str(venv / "bin" / "python")
    install = _run([python, "-m", "pip", "install", "--quiet", "--upgrade",
                    "--upgrade-strategy", "eager", "-c", str(REPO / "constraints-base.txt"),
                    f"{REPO}[test]"])
    assert install.returncode == 0, f"the newest allowed set does not install:\n{install.stderr}"
    check = _run([python, "-m", "pip", "check"])
    assert check.returncode == 0, f"pip check on the newest allowed set:\n{check.stdout}"
    freeze = _run([python, "-m", "pip", "freeze"]).stdout
    changes = drift(parse_lock((REPO / "constraints.txt").read_text(encoding="utf-8")), freeze)
    print("drift from constraints.txt:", ", ".join(changes) or "none")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    tests = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                  *CANARY_TESTS], cwd=REPO, env=env)
    assert tests.returncode == 0, (
        f"the newest allowed versions break the ML tests (drift: {', '.join(changes) or 'none'}); "
        f"tighten the bound in pyproject.toml or fix the code:\n{tests.stdout[-6000:]}")
