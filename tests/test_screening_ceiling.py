"""The arithmetic of benchmarks/screening_ceiling.py: shipped, best fixed in hindsight and the
per-query oracle against the static order (issue 38's ceiling figures)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "screening_ceiling.py"


@pytest.fixture(scope="module")
def ceiling():
    spec = importlib.util.spec_from_file_location("screening_ceiling", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_best_fixed_and_oracle_pick_per_split_and_per_query(ceiling):
    a, b = (32.0, 12.0), (0.0, 6.0)
    rows = [{"static": 10, "grid": {a: 8, b: 12}},   # a better here
            {"static": 20, "grid": {a: 22, b: 14}}]  # b better here
    s = ceiling.summary(rows, [a, b], a)
    assert s["queries"] == 2 and s["static"] == 15.0
    assert s["shipped"] == pytest.approx(30 / 30 - 1)          # 8 + 22 = 30
    assert s["best"] == "0/6" and s["best_fixed"] == pytest.approx(26 / 30 - 1)
    assert s["oracle"] == pytest.approx((8 + 14) / 30 - 1)
