"""The ranker model: LightGBM lambdarank by default, a logistic regression as the tiny fallback.

Both are seeded and deterministic (LightGBM: ``deterministic``, one thread) and saved as text:
LightGBM's own text model format, and the regression's coefficients as JSON; never pickle.
LightGBM gets monotone constraints where a feature's direction is known (more query entities
named never lowers a score; :func:`~curation.ranking.features.monotone_constraints`).

Contributions (LightGBM's ``pred_contrib``; for the regression, coefficient x standardised value)
explain a score feature by feature; :mod:`curation.ranking.explain` turns them into words.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curation.ranking.features import monotone_constraints
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

MODELS = ("lightgbm", "logistic")
LIGHTGBM_FILE = "model.txt"
LOGISTIC_FILE = "model.json"


@dataclass(frozen=True)
class RankerOptions:
    """Hyperparameters (defaults chosen on the dev splits of the BioRED tasks).

    Attributes:
        model: "lightgbm" (lambdarank) or "logistic" (relevant = grade > 0).
        n_estimators, learning_rate, num_leaves, min_child_samples: LightGBM's trees.
        c: Inverse regularisation of the logistic regression.
        seed: Seeds LightGBM's and the regression's randomness.
    """

    model: str = "lightgbm"
    n_estimators: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 15
    min_child_samples: int = 20
    c: float = 1.0
    seed: int = 13

    def __post_init__(self) -> None:
        problems = []
        if self.model not in MODELS:
            problems.append(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        for name in ("n_estimators", "num_leaves", "min_child_samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        for name in ("learning_rate", "c"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                problems.append(f"{name} must be a positive number, got {value!r}")
        if problems:
            raise CurationError("Bad ranker options: " + "; ".join(problems))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Group:
    """One training query: its candidates' feature rows and grades."""

    qid: str
    doc_ids: tuple[str, ...]
    features: np.ndarray
    grades: tuple[int, ...]


class Ranker:
    """A fitted ranker over named features."""

    def __init__(self, kind: str, names: Sequence[str], booster: Any = None,
                 linear: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.names = list(names)
        self.booster = booster
        self.linear = linear

    # -- scoring ---------------------------------------------------------------------------
    def _check(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.names):
            raise CurationError(f"the ranker takes {len(self.names)} features, got an array of "
                                f"shape {x.shape}; rebuild the features with this version's "
                                "feature list")
        return x

    def _standardised(self, x: np.ndarray) -> np.ndarray:
        assert self.linear is not None
        filled = np.where(np.isnan(x), 0.0, x)
        return (filled - np.asarray(self.linear["mean"])) / np.asarray(self.linear["scale"])

    def score(self, x: np.ndarray) -> np.ndarray:
        """One score per row (higher ranks first)."""
        x = self._check(x)
        if len(x) == 0:
            return np.zeros(0)
        if self.kind == "lightgbm":
            return np.asarray(self.booster.predict(x, num_threads=1), dtype=np.float64)
        z = self._standardised(x) @ np.asarray(self.linear["coef"]) + self.linear["intercept"]
        return np.asarray(z, dtype=np.float64)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        """Per-row, per-feature contributions to the score (rows x features; no bias column)."""
        x = self._check(x)
        if self.kind == "lightgbm":
            out = np.asarray(self.booster.predict(x, pred_contrib=True, num_threads=1))
            return out[:, :len(self.names)]
        return self._standardised(x) * np.asarray(self.linear["coef"])

    # -- files -----------------------------------------------------------------------------
    @property
    def filename(self) -> str:
        return LIGHTGBM_FILE if self.kind == "lightgbm" else LOGISTIC_FILE

    def save(self, folder: Path) -> Path:
        """Write the model file into ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.filename
        if self.kind == "lightgbm":
            self.booster.save_model(str(path))
        else:
            path.write_text(json.dumps({"names": self.names, **self.linear}, indent=1),
                            encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path, kind: str, names: Sequence[str]) -> Ranker:
        """Read a model file written by :meth:`save` (text only)."""
        if kind == "lightgbm":
            import lightgbm

            try:
                booster = lightgbm.Booster(model_file=str(path))
            except lightgbm.basic.LightGBMError as exc:
                raise CurationError(f"{path}: not a LightGBM text model ({exc})") from exc
            if booster.feature_name() != [_lgb_name(n) for n in names]:
                raise CurationError(f"{path}: its features {booster.feature_name()} differ from "
                                    "the manifest's; the version is damaged, train a new one")
            return cls(kind, names, booster=booster)
        if kind == "logistic":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CurationError(f"{path}: not a ranker JSON model ({exc})") from exc
            if data.get("names") != list(names):
                raise CurationError(f"{path}: its features differ from the manifest's")
            return cls(kind, names, linear={k: data[k] for k in ("coef", "intercept", "mean",
                                                                  "scale")})
        raise CurationError(f"unknown ranker kind {kind!r}; expected one of {', '.join(MODELS)}")


def _lgb_name(name: str) -> str:
    """LightGBM's feature names may not hold ':'."""
    return name.replace(":", "__")


def fit(groups: Sequence[Group], names: Sequence[str], options: RankerOptions) -> Ranker:
    """Fit a ranker on graded groups (groups without a positive teach lambdarank nothing and are
    dropped).

    Raises:
        CurationError: No group with a positive and a negative.
    """
    useful = [g for g in groups if len(g.grades) and max(g.grades) > 0 and min(g.grades) == 0]
    if not useful:
        raise CurationError("No training query has both a relevant and an irrelevant candidate; "
                            "label some abstracts or import KB relations that cite documents of "
                            "the workspace")
    x = np.vstack([g.features for g in useful])
    y = np.concatenate([np.asarray(g.grades, dtype=np.int32) for g in useful])
    if options.model == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMRanker(
            objective="lambdarank", n_estimators=options.n_estimators,
            learning_rate=options.learning_rate, num_leaves=options.num_leaves,
            min_child_samples=options.min_child_samples, random_state=options.seed,
            deterministic=True, force_col_wise=True, n_jobs=1, verbose=-1,
            monotone_constraints=monotone_constraints(names),
            monotone_constraints_method="advanced", label_gain=[2 ** i - 1 for i in range(31)])
        model.fit(x, y, group=[len(g.grades) for g in useful],
                  feature_name=[_lgb_name(n) for n in names])
        return Ranker("lightgbm", names, booster=model.booster_)
    from sklearn.linear_model import LogisticRegression

    filled = np.where(np.isnan(x), 0.0, x)
    mean = filled.mean(axis=0)
    scale = filled.std(axis=0)
    scale[scale == 0] = 1.0
    clf = LogisticRegression(C=options.c, max_iter=1000, random_state=options.seed)
    clf.fit((filled - mean) / scale, (y > 0).astype(int))
    linear = {"coef": [float(v) for v in clf.coef_[0]], "intercept": float(clf.intercept_[0]),
              "mean": [float(v) for v in mean], "scale": [float(v) for v in scale]}
    if not all(math.isfinite(v) for v in linear["coef"]):
        raise CurationError("the logistic regression did not converge to finite weights")
    return Ranker("logistic", names, linear=linear)
