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
from typing import Any, Protocol

import numpy as np

from curation.ranking.features import monotone_constraints
from kb_sources.errors import CurationError, UnknownNameError
from kb_sources.json_text import read_json
from kb_sources.plugins import Registry, load_target

logger = logging.getLogger(__name__)

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
        if self.model not in RANKER_MODELS:
            problems.append(f"model must be one of {', '.join(RANKER_MODELS.names())}, got "
                            f"{self.model!r}")
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


class RankerModel(Protocol):
    """What a ranker model kind implements (registered in :data:`RANKER_MODELS`)."""

    filename: str

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, group_sizes: Sequence[int],
            names: Sequence[str], options: RankerOptions) -> RankerModel: ...

    @classmethod
    def load(cls, path: Path, names: Sequence[str]) -> RankerModel: ...

    def score(self, x: np.ndarray) -> np.ndarray: ...

    def contributions(self, x: np.ndarray) -> np.ndarray: ...

    def save(self, path: Path) -> None: ...


class LightGBMModel:
    """LightGBM lambdarank, monotone where a feature's direction is known; a text model file."""

    filename = LIGHTGBM_FILE

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, group_sizes: Sequence[int],
            names: Sequence[str], options: RankerOptions) -> LightGBMModel:
        import lightgbm

        model = lightgbm.LGBMRanker(
            objective="lambdarank", n_estimators=options.n_estimators,
            learning_rate=options.learning_rate, num_leaves=options.num_leaves,
            min_child_samples=options.min_child_samples, random_state=options.seed,
            deterministic=True, force_col_wise=True, n_jobs=1, verbose=-1,
            monotone_constraints=monotone_constraints(names),
            monotone_constraints_method="advanced", label_gain=[2 ** i - 1 for i in range(31)])
        model.fit(x, y, group=list(group_sizes), feature_name=[_lgb_name(n) for n in names])
        return cls(model.booster_)

    @classmethod
    def load(cls, path: Path, names: Sequence[str]) -> LightGBMModel:
        import lightgbm

        from curation.ranking.model_check import check_lightgbm_text

        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CurationError(f"{path}: not a readable LightGBM text model ({exc})") from exc
        try:  # LightGBM aborts the process on some damaged files: check the structure first
            check_lightgbm_text(text, len(names))
            booster = lightgbm.Booster(model_str=text)
        except (CurationError, lightgbm.basic.LightGBMError) as exc:
            raise CurationError(f"{path}: not a LightGBM text model this code can load ({exc}); "
                                "the version is damaged, train a new one") from exc
        if booster.feature_name() != [_lgb_name(n) for n in names]:
            raise CurationError(f"{path}: its features {booster.feature_name()} differ from "
                                "the manifest's; the version is damaged, train a new one")
        return cls(booster)

    def score(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.predict(x, num_threads=1), dtype=np.float64)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        out = np.asarray(self.booster.predict(x, pred_contrib=True, num_threads=1))
        return out[:, :x.shape[1]]

    def save(self, path: Path) -> None:
        # written by Python, not LightGBM's C++ writer: a full disk is an OSError (ENOSPC)
        path.write_text(self.booster.model_to_string(), encoding="utf-8")


class LogisticModel:
    """A logistic regression (relevant = grade > 0) on standardised features; JSON weights."""

    filename = LOGISTIC_FILE

    def __init__(self, names: Sequence[str], coef: Sequence[float], intercept: float,
                 mean: Sequence[float], scale: Sequence[float]) -> None:
        self.names = list(names)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, group_sizes: Sequence[int],
            names: Sequence[str], options: RankerOptions) -> LogisticModel:
        from sklearn.linear_model import LogisticRegression

        filled = np.where(np.isnan(x), 0.0, x)
        mean = filled.mean(axis=0)
        scale = filled.std(axis=0)
        scale[scale == 0] = 1.0
        clf = LogisticRegression(C=options.c, max_iter=1000, random_state=options.seed)
        clf.fit((filled - mean) / scale, (y > 0).astype(int))
        coef = [float(v) for v in clf.coef_[0]]
        if not all(math.isfinite(v) for v in coef):
            raise CurationError("the logistic regression did not converge to finite weights")
        return cls(names, coef, float(clf.intercept_[0]), [float(v) for v in mean],
                   [float(v) for v in scale])

    @classmethod
    def load(cls, path: Path, names: Sequence[str]) -> LogisticModel:
        try:
            data = read_json(path, expected="a ranker JSON model (an object with names, coef, "
                             "intercept, mean and scale)", fix="the version is damaged, train "
                             "a new one")
        except OSError as exc:
            raise CurationError(f"{path}: not a ranker JSON model ({exc})") from exc
        if not isinstance(data, dict):
            raise CurationError(f"{path}: not a ranker JSON model (expected an object with names, "
                                f"coef, intercept, mean and scale, got {type(data).__name__}); "
                                "the version is damaged, train a new one")
        if data.get("names") != list(names):
            raise CurationError(f"{path}: its features differ from the manifest's")
        n = len(names)
        arrays = {key: data.get(key) for key in ("coef", "mean", "scale")}
        bad = [key for key, v in arrays.items() if not _finite_list(v, n)]
        if not _finite_list([data.get("intercept")], 1):
            bad.append("intercept")
        if not bad and any(v == 0 for v in arrays["scale"]):
            bad.append("scale (a zero)")
        if bad:
            raise CurationError(f"{path}: not a ranker JSON model: {', '.join(bad)} must be "
                                f"finite numbers ({n} per list); the version is damaged, train "
                                "a new one")
        return cls(names, arrays["coef"], data["intercept"], arrays["mean"], arrays["scale"])

    def _standardised(self, x: np.ndarray) -> np.ndarray:
        return (np.where(np.isnan(x), 0.0, x) - self.mean) / self.scale

    def score(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._standardised(x) @ self.coef + self.intercept, dtype=np.float64)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        return self._standardised(x) * self.coef

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"names": self.names, "coef": self.coef.tolist(),
                                    "intercept": self.intercept, "mean": self.mean.tolist(),
                                    "scale": self.scale.tolist()}, indent=1), encoding="utf-8")


@dataclass(frozen=True)
class RankerModelSpec:
    """One registered ranker model kind: ``target`` names its :class:`RankerModel` class."""

    name: str
    target: str
    description: str


#: The ranker model kinds (``RankerOptions.model``); the entry-point group
#: ``kbcurate.ranker_models`` adds plug-ins (a RankerModelSpec).
RANKER_MODELS: Registry[RankerModelSpec] = Registry("ranker model", [
    RankerModelSpec("lightgbm", "curation.ranking.model:LightGBMModel",
                    "LightGBM lambdarank (the default)"),
    RankerModelSpec("logistic", "curation.ranking.model:LogisticModel",
                    "logistic regression (the tiny fallback)"),
], group="kbcurate.ranker_models",
    accept=lambda e: None if isinstance(e, RankerModelSpec) else "expected a RankerModelSpec",
    error=lambda kind, name, available: UnknownNameError(kind, name, available))


def model_class(kind: str) -> type[RankerModel]:
    """The :class:`RankerModel` class of a registered kind.

    Raises:
        UnknownNameError: No such kind (the message lists them).
    """
    return load_target(RANKER_MODELS.get(kind).target)


class Ranker:
    """A fitted ranker over named features: a model kind and its fitted model."""

    def __init__(self, kind: str, names: Sequence[str], model: RankerModel) -> None:
        self.kind = kind
        self.names = list(names)
        self.model = model

    def _check(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.names):
            raise CurationError(f"the ranker takes {len(self.names)} features, got an array of "
                                f"shape {x.shape}; rebuild the features with this version's "
                                "feature list")
        return x

    def score(self, x: np.ndarray) -> np.ndarray:
        """One score per row (higher ranks first)."""
        x = self._check(x)
        if len(x) == 0:
            return np.zeros(0)
        return self.model.score(x)

    def contributions(self, x: np.ndarray) -> np.ndarray:
        """Per-row, per-feature contributions to the score (rows x features; no bias column)."""
        return self.model.contributions(self._check(x))

    @property
    def filename(self) -> str:
        return self.model.filename

    def save(self, folder: Path) -> Path:
        """Write the model file into ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.filename
        self.model.save(path)
        return path

    @classmethod
    def load(cls, path: Path, kind: str, names: Sequence[str]) -> Ranker:
        """Read a model file written by :meth:`save` (text only).

        Raises:
            CurationError: Not a model of that kind, other features, or an unknown kind.
        """
        try:
            model = model_class(kind)
        except UnknownNameError as exc:
            raise CurationError(f"unknown ranker kind {kind!r}; expected one of "
                                f"{', '.join(RANKER_MODELS.names())}") from exc
        return cls(kind, names, model.load(path, names))


def _finite_list(values: Any, n: int) -> bool:
    """A list of ``n`` finite numbers (no bools)."""
    return (isinstance(values, list) and len(values) == n
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values))


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
    model = model_class(options.model).fit(x, y, [len(g.grades) for g in useful], names, options)
    return Ranker(options.model, names, model)
