"""Checks of a ranker model file before this process loads it (issue 35).

LightGBM reads its text model in C++: a damaged file (a split on a feature that does not exist,
a child index out of range, ``threshold=nan``, ``num_leaves=2e9``, a cycle between nodes) makes
it abort (``[Fatal] Model format error``, exit 134), crash or loop for ever, taking the whole
process with it: the app server, the CLI. So a file is checked first, once per SHA-256:

1. in Python, its structure: the header's feature count, every tree's arrays of the right
   length, finite numbers, split features and child indexes in range, children after their
   parent (no cycle), each leaf reached once, no categorical or linear trees (this code trains
   neither), ``tree_sizes`` matching the tree blocks;
2. then LightGBM loads it and predicts in a **child process** (with a timeout): an abort or a
   crash there is a verdict, not the end of this process.

The verdict is kept in this process's memory by checksum (and, by the caller, in the workspace
database: ``ranker_versions.checked_sha256``), so the hot path pays it once per file. A version
this code saved itself is recorded as checked at saving (the file is LightGBM's own output, and
its checksum is verified before every load).
"""

from __future__ import annotations

import logging
import math
import re
import subprocess
import sys
from pathlib import Path

from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Largest ``num_leaves`` accepted in a tree (LightGBM's own limit is 131072).
MAX_LEAVES = 131_072
#: Seconds the child process may take to load the model and predict.
CHECK_TIMEOUT_S = 60.0
#: sha256 -> "" (passed) or why it failed; this process's verdicts.
_VERDICTS: dict[str, str] = {}

_CHILD = """
import sys
import numpy as np
import lightgbm
booster = lightgbm.Booster(model_file=sys.argv[1])
n = int(sys.argv[2])
if booster.num_feature() != n:
    sys.exit(f"the model takes {booster.num_feature()} features, the manifest names {n}")
rng = np.random.default_rng(13)
x = rng.normal(0.0, 10.0, size=(64, n))
x[0], x[1], x[2], x[3] = 0.0, np.nan, 1e30, -1e30
x[4:32][rng.random((28, n)) < 0.3] = np.nan
scores = booster.predict(x, num_threads=1)
booster.predict(x, pred_contrib=True, num_threads=1)
if not np.all(np.isfinite(scores)):
    sys.exit("its scores are not finite numbers")
print("ok")
"""

class CheckTimeout(CurationError):
    """The child process ran past its timeout (a busy machine, or a model that loops)."""


_INT_ARRAYS = ("split_feature", "decision_type", "left_child", "right_child", "internal_count")
_FLOAT_ARRAYS = ("split_gain", "threshold", "internal_value", "internal_weight")
_LEAF_ARRAYS = ("leaf_value", "leaf_weight", "leaf_count")


def remember_checked(sha256: str) -> None:
    """Record that the file with this checksum passed (a version this process just saved)."""
    _VERDICTS[sha256] = ""


def check_model_file(path: Path, n_features: int, sha256: str) -> None:
    """Check a LightGBM text model (structure in Python, then a load in a child process),
    once per checksum in this process.

    Raises:
        CurationError: The file is damaged; the message names it and what to do.
    """
    verdict = _VERDICTS.get(sha256)
    if verdict is None:
        keep = True
        try:
            check_lightgbm_text(path.read_text(encoding="utf-8"), n_features)
            check_in_child(path, n_features)
            verdict = ""
        except CheckTimeout as exc:  # a busy machine, perhaps: ask again next time
            verdict, keep = str(exc), False
        except (CurationError, OSError, UnicodeDecodeError) as exc:
            verdict = str(exc)
        if keep:
            _VERDICTS[sha256] = verdict
    if verdict:
        raise CurationError(f"{path}: not a LightGBM model this code can load safely "
                            f"({verdict}); it was not loaded. The version is damaged: an admin "
                            "activates another version or trains a new one (kbcurate rank train)")


def check_in_child(path: Path, n_features: int, timeout: float = CHECK_TIMEOUT_S) -> None:
    """Load the model and predict in a child process.

    Raises:
        CurationError: The child aborted, crashed, failed or ran past ``timeout`` seconds.
    """
    if not sys.executable:
        logger.warning("no Python executable to check %s in a child process; the structure "
                       "check alone decides", path)
        return
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(n_features)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CheckTimeout(f"LightGBM did not finish reading it in {timeout:g} s") from exc
    if done.returncode == 0 and done.stdout.strip().endswith("ok"):
        return
    lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    fatal = next((ln for ln in reversed(lines) if "Fatal" in ln), lines[-1] if lines else "")
    how = {-6: "LightGBM aborted", 134: "LightGBM aborted", -11: "LightGBM crashed",
           139: "LightGBM crashed"}.get(done.returncode, f"exit status {done.returncode}")
    raise CurationError(f"{how} reading it: {fatal[:200]}" if fatal else how)


def check_lightgbm_text(text: str, n_features: int) -> None:
    """The structure of a LightGBM text model, in Python (never crashes).

    Raises:
        CurationError: What is wrong, where (tree number and key).
    """
    header, sep, rest = text.partition("\nTree=")
    if not text.startswith("tree\n") or not sep or "\nend of trees" not in rest:
        raise CurationError("not a LightGBM text model (expected 'tree', 'Tree=0' blocks and "
                            "'end of trees')")
    head = _pairs(header)
    if _int(head, "num_class", "header") != 1 or _int(head, "num_tree_per_iteration",
                                                      "header") != 1:
        raise CurationError("the header's num_class and num_tree_per_iteration must be 1")
    if _int(head, "max_feature_idx", "header") != n_features - 1:
        raise CurationError(f"the header's max_feature_idx must be {n_features - 1} (the "
                            f"manifest names {n_features} features)")
    if len(head.get("feature_names", "").split()) != n_features:
        raise CurationError(f"the header must name {n_features} features")
    starts = [m.start() + 1 for m in re.finditer(r"\nTree=", text)]
    ends = [*starts[1:], text.index("\nend of trees") + 1]
    blocks = [text[a:b] for a, b in zip(starts, ends, strict=True)]
    sizes = _ints(head.get("tree_sizes", ""), "tree_sizes", "header")
    if len(sizes) != len(blocks):
        raise CurationError(f"the header's tree_sizes lists {len(sizes)} trees, the file "
                            f"holds {len(blocks)}")
    for i, block in enumerate(blocks):
        check_tree(_pairs(block), i, n_features)
        if len(block.encode("utf-8")) != sizes[i]:
            raise CurationError(f"tree {i} is not the size tree_sizes says ({sizes[i]} bytes)")


def check_tree(tree: dict[str, str], i: int, n_features: int) -> None:
    """One tree's arrays (see :func:`check_lightgbm_text`)."""
    where = f"tree {i}"
    if tree.get("Tree") != str(i):
        raise CurationError(f"{where}: expected 'Tree={i}'")
    leaves = _int(tree, "num_leaves", where)
    if not 1 <= leaves <= MAX_LEAVES:
        raise CurationError(f"{where}: num_leaves must be 1..{MAX_LEAVES}, got {leaves}")
    if _int(tree, "num_cat", where) != 0 or tree.get("is_linear", "0") != "0":
        raise CurationError(f"{where}: categorical or linear trees are not models this code "
                            "trains")
    _float(tree.get("shrinkage", "1"), "shrinkage", where)
    _length(_floats(tree.get("leaf_value", ""), "leaf_value", where), leaves, "leaf_value",
            where)
    if leaves == 1:  # a stump: its other arrays are empty or hold the one leaf's count
        return
    for key in _LEAF_ARRAYS[1:]:
        if key in tree:
            _length(_floats(tree[key], key, where), leaves, key, where)
    nodes = leaves - 1
    arrays = {k: _ints(tree.get(k, ""), k, where) for k in _INT_ARRAYS if k in tree
              or k != "internal_count"}
    for key in _FLOAT_ARRAYS:
        if key in tree or key == "threshold":  # +-inf: LightGBM's split of missing vs scored
            _length(_floats(tree.get(key, ""), key, where, key == "threshold"), nodes, key,
                    where)
    for key, values in arrays.items():
        _length(values, nodes, key, where)
    if any(not 0 <= f < n_features for f in arrays["split_feature"]):
        raise CurationError(f"{where}: split_feature must be 0..{n_features - 1}")
    if any(not 0 <= d < 16 or d & 1 for d in arrays["decision_type"]):
        raise CurationError(f"{where}: decision_type holds a categorical or unknown split")
    _check_children(arrays["left_child"], arrays["right_child"], leaves, where)


def _check_children(left: list[int], right: list[int], leaves: int, where: str) -> None:
    """Children come after their parent (no cycle); every node but the root and every leaf
    is reached exactly once."""
    seen_nodes, seen_leaves = [0] * (leaves - 1), [0] * leaves
    for parent, children in enumerate(zip(left, right, strict=True)):
        for child in children:
            if child >= 0:
                if not parent < child < leaves - 1:
                    raise CurationError(f"{where}: node {parent} has child {child}, outside "
                                        f"{parent + 1}..{leaves - 2}")
                seen_nodes[child] += 1
            elif ~child < leaves:
                seen_leaves[~child] += 1
            else:
                raise CurationError(f"{where}: node {parent} points at leaf {~child}, but the "
                                    f"tree has {leaves} leaves")
    if seen_nodes[1:] != [1] * (leaves - 2) or seen_leaves != [1] * leaves:
        raise CurationError(f"{where}: its nodes and leaves are not one tree")


def _pairs(block: str) -> dict[str, str]:
    out = {}
    for line in block.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def _int(values: dict[str, str], key: str, where: str) -> int:
    try:
        return int(values[key])
    except (KeyError, ValueError) as exc:
        raise CurationError(f"{where}: {key} must be a whole number, got "
                            f"{values.get(key)!r:.40}") from exc


def _ints(text: str, key: str, where: str) -> list[int]:
    try:
        return [int(v) for v in text.split()]
    except ValueError as exc:
        raise CurationError(f"{where}: {key} must hold whole numbers") from exc


def _float(text: str, key: str, where: str, infinite: bool = False) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise CurationError(f"{where}: {key} must hold numbers, got {text!r:.40}") from exc
    if math.isnan(value) or not (infinite or math.isfinite(value)):
        kind = "numbers (no nan)" if infinite else "finite numbers"
        raise CurationError(f"{where}: {key} must hold {kind}, got {text!r:.40}")
    return value


def _floats(text: str, key: str, where: str, infinite: bool = False) -> list[float]:
    return [_float(v, key, where, infinite) for v in text.split()]


def _length(values: list, expected: int, key: str, where: str) -> None:
    if len(values) != expected:
        raise CurationError(f"{where}: {key} must hold {expected} values, got {len(values)}")
