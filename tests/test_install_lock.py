"""The install is reproducible: constraints.txt locks the whole tested set, pyproject.toml's bounds
admit exactly that set, and the environment running the tests was installed from the lock.

A failure here means the lock and the project's requirements drifted apart (a dependency added
to pyproject.toml without refreshing the lock, or an environment not made by the README's
command): refresh with ``.ci/lock`` and run ``.ci/run`` (README, "Install").
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
# The fast-moving stack whose upper bounds must be explicit (issue 24).
BOUNDED = ("torch", "transformers", "sentence-transformers", "peft", "streamlit", "numpy")
FIX = "refresh the lock with `.ci/lock` and reinstall with the README's command"


def parse_lock(text: str) -> dict[str, Version]:
    """``name==version`` lines of a lock file (comments and blanks skipped), canonical names."""
    pins: dict[str, Version] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or requirement.url:
            raise AssertionError(f"constraints.txt line {number}: {raw!r} is not name==version")
        pins[canonicalize_name(requirement.name)] = Version(specs[0].version)
    return pins


def project_requirements() -> list[Requirement]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = data["project"]["optional-dependencies"]
    requirements = [Requirement(r) for r in data["project"]["dependencies"]]
    for name in extras["test"]:
        requirement = Requirement(name)
        if canonicalize_name(requirement.name) == "kbcurate":
            for extra in requirement.extras:
                requirements += [Requirement(r) for r in extras[extra]]
        else:
            requirements.append(requirement)
    return requirements


@pytest.fixture(scope="module")
def lock() -> dict[str, Version]:
    return parse_lock((REPO / "constraints.txt").read_text(encoding="utf-8"))


def test_parse_lock_refuses_ranges():
    assert parse_lock("# c\nFoo_Bar==1.2.3  # why\n\n") == {"foo-bar": Version("1.2.3")}
    with pytest.raises(AssertionError, match="line 2.*not name==version"):
        parse_lock("a==1\nnumpy<2\n")


def test_ml_stack_has_explicit_upper_bounds():
    by_name = {canonicalize_name(r.name): r for r in project_requirements()}
    for name in BOUNDED:
        specs = by_name[name].specifier
        assert any(s.operator in ("<", "<=", "==", "~=") for s in specs), \
            f"pyproject.toml: {name} needs an upper bound, has {specs or 'none'}"


def test_lock_satisfies_every_project_requirement(lock):
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        assert name in lock, f"{name} is required by pyproject.toml but not in the lock: {FIX}"
        assert requirement.specifier.contains(lock[name], prereleases=True), \
            f"the lock's {name}=={lock[name]} violates pyproject.toml's {requirement}: {FIX}"


def test_lock_keeps_the_hand_pins(lock):
    base = (REPO / "constraints-base.txt").read_text(encoding="utf-8")
    for raw in base.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            assert requirement.specifier.contains(lock[name]), (name, lock[name], line)
    assert lock["torch"] == Version("2.13.0") and lock["numpy"] < Version("2")


def test_environment_was_installed_from_the_lock(lock):
    """Every distribution installed here is pinned, at the pinned version (pip check's job is
    compatibility; this is reproducibility)."""
    wrong, unpinned = [], []
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        if name in ("kbcurate", "pip", "setuptools", "wheel"):
            continue
        if Path(str(dist.locate_file(""))).name not in ("site-packages", "dist-packages"):
            continue  # copies vendored inside a package (setuptools/_vendor, ray/thirdparty_files)
        installed = Version(dist.version)
        if name not in lock:
            unpinned.append(f"{name} {installed}")
        elif Version(installed.public) != lock[name]:  # torch 2.13.0+cpu is 2.13.0
            wrong.append(f"{name} {installed} (lock: {lock[name]})")
    assert not wrong, f"installed versions differ from constraints.txt: {wrong}; {FIX}"
    assert not unpinned, f"installed but not in constraints.txt: {unpinned}; {FIX}"
