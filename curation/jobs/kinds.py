"""The registry of background job kinds: what each runs, who may start it, which parameters
it accepts and how its values are checked (see :mod:`curation.jobs.queue`).

A kind names its function and validator as ``module:function`` strings, so this wing imports no
job's code. Adding a kind is one :class:`JobKind` line in :data:`JOB_KINDS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from curation.access.users import Role, User
from curation.jobs.guards import check_params
from curation.store.workspace import Workspace

#: The actor of internal callers (CLI demo, maintenance, benchmarks): an admin whose name no
#: real user can have (user names are letters, digits, '.', '_' and '-').
SYSTEM_USER = User("<system>", Role.ADMIN)


@dataclass(frozen=True)
class JobKind:
    """A registered kind of background job.

    Attributes:
        name: The kind's name (``submit_job(ws, name, ...)``).
        target: ``module:function`` run by the worker as ``fn(ctx, **params)``.
        description: One line for listings.
        admin_only: Only admins may submit it (and cancel it).
        params: The parameter names it accepts; any other name is refused at submission.
        validator: Optional ``module:function`` called as ``fn(ws, params)`` at submission; it
            raises :class:`CurationError` for a bad value (e.g. a path outside the workspace).
    """

    name: str
    target: str
    description: str
    admin_only: bool = True
    params: tuple[str, ...] = ()
    validator: str | None = None

    def load(self) -> Callable[..., dict[str, Any]]:
        return _load_function(self.target)

    def check(self, ws: Workspace, params: Mapping[str, Any]) -> None:
        """Refuse unknown parameter names, then run the kind's validator, if any."""
        check_params(self.name, params, self.params)
        if self.validator:
            _load_function(self.validator)(ws, dict(params))


def _load_function(target: str) -> Callable[..., Any]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


JOB_KINDS: dict[str, JobKind] = {
    kind.name: kind for kind in (
        JobKind("evaluate", "curation.evaluation.runner:run_evaluation",
                "evaluate retrievers on a schema's held-out queries",
                params=("schema", "retrievers", "split", "options")),
        JobKind("index", "curation.search.indexing:run_index_job",
                "build or update a retriever index over the workspace documents",
                admin_only=False, params=("retriever", "options", "rebuild"),
                validator="curation.search.indexing:check_index_params"),
        JobKind("train", "curation.training.jobs:run_training",
                "train a dense retriever (EDEL, BiCA or BioHiCL) into a new model version",
                params=("schema", "options", "recipe")),
        JobKind("retrain", "curation.training.jobs:run_retrain",
                "retrain a schema's model on KB + labels; promote it if it passes the gate",
                params=("schema", "options")),
        JobKind("activate", "curation.training.activation:run_activation",
                "build a model version's dense and hybrid indexes, then make it the active one",
                params=("schema", "version", "reason"),
                validator="curation.training.activation:check_activation_params"),
        JobKind("rank", "curation.training.ranker:run_ranker_job",
                "retrain a schema's learned ranker on KB + labels (seconds); the gate promotes it",
                admin_only=False, params=("schema", "labels"),
                validator="curation.training.ranker:check_rank_params"),
        JobKind("simulate", "curation.training.jobs:run_simulation",
                "simulate labelling and retraining rounds in a copy of the workspace",
                params=("schema", "config", "options")),
        JobKind("selftest", "curation.jobs.queue:selftest",
                "check that background workers start and report progress", params=("steps",)),
    )
}
