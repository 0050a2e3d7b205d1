"""Issue 38: the screening calibration is fitted per schema with each ranker version (on the
round's out-of-fold scores of the held-out pool), kept in the version's manifest, and used by
the relation's screening queue; a version without one (or with a damaged one) falls back to the
default calibration, and the panel says which it uses."""

from __future__ import annotations

import numpy as np

from curation.access.users import Role, User
from curation.evaluation.harness import build_task
from curation.ranking.model import RankerOptions
from curation.screening.calibration import (
    DEFAULT_CALIBRATION,
    Calibration,
    fit_calibration,
    version_calibration,
)
from curation.screening.queue import build_queue, screening_candidates
from curation.screening.sources import version_source
from curation.training.heldout import assign_folds, out_of_fold, prepare
from curation.training.ranker import open_context, train_ranker
from tests.loop_fixtures import make_loop_workspace

ADMIN = User("admin", Role.ADMIN)
SMALL = RankerOptions(n_estimators=20, min_child_samples=1)


def test_a_ranker_round_fits_its_screening_calibration_on_the_held_out_pool(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    result = train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=SMALL)
    stored = result.version.manifest["calibration"]
    pool = [q for q in build_task(ws, "disease_gene").queries if q.split in ("dev", "test")]
    assert stored["queries"] == len(pool) == result.measurement.pool == 4
    cal = version_calibration(result.version.manifest)
    assert cal != DEFAULT_CALIBRATION and cal.queries == 4
    assert cal.slope >= 0 and cal.rank_slope <= 0
    # the same fit, by hand: each pool query's screening-deep candidate list (as deep as the
    # app's queue, not the ranker's top 100) scored out of fold (no label: the served model)
    ctx = open_context(ws, "disease_gene", progress=False)
    deep = {q.qid: screening_candidates(ctx, q.text, q.query, q.qid) for q in pool}
    scores: dict[str, np.ndarray] = {}
    from curation.ranking.versions import load_ranker
    model = load_ranker(result.version)
    out_of_fold(prepare(ctx, pool), assign_folds(q.group for q in pool), model, set(),
                lambda groups: model, {k: x for k, (_, x) in deep.items()}, scores)
    again = fit_calibration([scores[q.qid] for q in pool],
                            [np.isin(np.array(deep[q.qid][0]), list(q.gold)) for q in pool])
    assert abs(again.intercept - cal.intercept) < 1e-4 and abs(again.slope - cal.slope) < 1e-4
    assert abs(again.rank_slope - cal.rank_slope) < 1e-4
    # the queue of a relation turns its scores into priors with it
    queue = build_queue("q", ["a", "b", "c"], ["x y", "y z", "z x"], [2.0, 0.5, 1.0],
                        calibration=cal)
    assert queue.calibration == cal
    assert np.allclose(queue.prior, cal.log_odds(np.array([2.0, 1.0, 0.5])))
    words = version_source("disease_gene", "learned ranker disease_gene-ranker@1",
                           result.version.manifest).words()
    assert words == ("Calibrated on disease_gene's 4 held-out queries (learned ranker "
                     "disease_gene-ranker@1).")


def test_a_version_without_a_calibration_or_with_a_damaged_one_uses_the_default():
    assert version_calibration({}) is DEFAULT_CALIBRATION
    for bad in ("x", {"intercept": 1.0}, {"intercept": 0.0, "slope": -1.0, "rank_slope": 0.0},
                {"intercept": float("nan"), "slope": 1.0, "rank_slope": 0.0},
                {"intercept": True, "slope": 1.0, "rank_slope": 0.0}):
        assert version_calibration({"calibration": bad}) is DEFAULT_CALIBRATION, bad
    good = {"intercept": -1.0, "slope": 0.5, "rank_slope": -0.2, "queries": 12}
    assert version_calibration({"calibration": good}) == Calibration(-1.0, 0.5, -0.2, 12)
    words = version_source("PO", "learned ranker PO-ranker@1", {}).words()
    assert words == ("Default calibration (built in): learned ranker PO-ranker@1 has none of "
                     "its own; a new ranker round fits one.")
