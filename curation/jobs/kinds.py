"""The registry of background job kinds: what each runs, who may start it, which parameters
it accepts, how its values are checked and how long one job may run (see
:mod:`curation.jobs.queue`).

Job kinds register themselves: each wing that has background work declares its kinds as a
tuple ``JOB_KINDS`` of :class:`JobKind` in its own ``job_kinds`` module. The product's own kinds
(``activate``, ``rank``, ``pubmed_search``, ...) are read from the ``job_kinds`` modules of the
wings of this package (:func:`product_kind_modules`: each ``curation/<wing>/job_kinds.py``
beside this wing), never through distribution metadata: a distribution that calls itself
``kbcurate`` and comes first on ``sys.path`` hides the product's own entry points and could
otherwise declare ``activate`` open to everyone. Plug-ins declare more kinds in the entry-point
group :data:`GROUP` of their distribution (``pyproject.toml``)::

    [project.entry-points."kbcurate.job_kinds"]
    mywing = "mypackage.job_kinds:JOB_KINDS"

An entry point that names a product kind is refused, with an error in the log, whichever
distribution declares it (the product's own ``pyproject.toml`` declares its wings' modules too,
for tools that list entry points; those are the modules already read and are skipped).

:data:`JOB_KINDS` (a :class:`~kb_sources.plugins.Registry`) holds this wing's own kind,
``selftest``, and reads the wings (its ``own_targets``) and the group when first asked. A kind
names its function and validator as ``module:function``, imported only when a job runs or is
submitted
(:func:`~kb_sources.plugins.load_target`), so this wing imports no job's code. Look kinds up
with :func:`get_kind` (an unknown name raises :class:`~kb_sources.errors.UnknownNameError`
listing the available ones) or :func:`find_kind`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.access.users import Role, User
from curation.jobs.guards import check_params
from curation.store.workspace import Workspace
from kb_sources.errors import UnknownNameError
from kb_sources.plugins import Registry, load_target

logger = logging.getLogger(__name__)

#: The entry-point group in which installed distributions declare job kinds.
GROUP = "kbcurate.job_kinds"
#: The attribute of a wing's ``job_kinds`` module that lists its kinds.
KINDS_ATTR = "JOB_KINDS"

#: The longest a job of a kind that declares no limit may run (seconds): a day, for training,
#: index builds and evaluations on one machine.
DEFAULT_MAX_SECONDS = 24 * 3600.0
#: The environment variable that overrides a kind's limit (minutes), e.g.
#: ``KBCURATE_JOB_MAX_MINUTES_PUBMED_SEARCH=45``; read when a job starts.
MAX_MINUTES_ENV = "KBCURATE_JOB_MAX_MINUTES_{kind}"

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
        roles: When not empty, only users with one of these roles may submit it (admins
            always may); e.g. curators and admins search PubMed, annotators do not.
        params: The parameter names it accepts; any other name is refused at submission.
        validator: Optional ``module:function`` called as ``fn(ws, params)`` at submission; it
            raises :class:`CurationError` for a bad value (e.g. a path outside the workspace).
        unique_by: Parameter names that identify the same work: while a queued or running job
            of this kind has the same values, submitting another returns that job instead
            (decided in one database transaction, so users clicking at the same instant get
            one job). Empty: every submission queues a job.
        max_seconds: The longest one job of this kind may run; a job still running then is
            failed and its worker stopped (:mod:`curation.jobs.lifecycle`), so a job stuck on
            a server that trickles bytes never holds its work for good. The environment
            variable :data:`MAX_MINUTES_ENV` overrides it (:meth:`max_run_s`).
    """

    name: str
    target: str
    description: str
    admin_only: bool = True
    roles: frozenset[Role] = frozenset()
    params: tuple[str, ...] = ()
    validator: str | None = None
    unique_by: tuple[str, ...] = ()
    max_seconds: float = DEFAULT_MAX_SECONDS

    def load(self) -> Callable[..., dict[str, Any]]:
        """The kind's function (imported now).

        Raises:
            RegistryError: The target cannot be imported.
        """
        return load_target(self.target)

    def check(self, ws: Workspace, params: Mapping[str, Any]) -> None:
        """Refuse unknown parameter names, then run the kind's validator, if any."""
        check_params(self.name, params, self.params)
        if self.validator:
            load_target(self.validator)(ws, dict(params))

    @property
    def max_minutes_env(self) -> str:
        """The environment variable that overrides :attr:`max_seconds` (in minutes)."""
        return MAX_MINUTES_ENV.format(kind=self.name.upper().replace("-", "_"))

    def max_run_s(self) -> float:
        """The longest a job of this kind may run now, in seconds: :attr:`max_minutes_env`
        when it is set to a number of minutes > 0 (else a warning, and the kind's own)."""
        text = os.environ.get(self.max_minutes_env, "").strip()
        if not text:
            return self.max_seconds
        try:
            minutes = float(text)
        except ValueError:
            minutes = 0.0
        if not 0 < minutes < float("inf"):
            logger.warning("%s=%r ignored: expected minutes > 0, e.g. 45; a %s job may run "
                           "%s", self.max_minutes_env, text, self.name,
                           duration(self.max_seconds))
            return self.max_seconds
        return minutes * 60.0


def duration(seconds: float) -> str:
    """A run time in words: "40 s", "20 min", "24 h"."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


#: This wing's own kind: a diagnostic job (:func:`curation.jobs.queue.selftest`).
SELFTEST = JobKind("selftest", "curation.jobs.queue:selftest",
                   "check that background workers start and report progress", params=("steps",),
                   max_seconds=600.0)


def _not_a_kind(entry: object) -> str | None:
    """Why a plug-in's entry is refused (it is not a :class:`JobKind`), or None."""
    if isinstance(entry, JobKind):
        return None
    return f"expected a JobKind, got {type(entry).__name__}"


def product_kind_modules() -> list[str]:
    """The ``job_kinds`` modules of this package's wings (``curation.<wing>.job_kinds``, by
    wing name), found in the package's own folder: the product's kinds come from its own code,
    never from entry points another distribution could shadow."""
    package = __name__.split(".")[0]
    root = Path(__file__).resolve().parents[1]
    return [f"{package}.{wing.name}.job_kinds" for wing in sorted(root.iterdir())
            if (wing / "__init__.py").is_file() and (wing / "job_kinds.py").is_file()]


def product_kind_targets() -> list[str]:
    """``curation.<wing>.job_kinds:JOB_KINDS`` of every wing (:func:`product_kind_modules`)."""
    return [f"{module}:{KINDS_ATTR}" for module in product_kind_modules()]


def job_kind_registry(extra: Iterable[JobKind] = ()) -> Registry[JobKind]:
    """A registry of job kinds: ``selftest`` and ``extra`` built in, then the kinds of the
    product's wings (:func:`product_kind_modules`), then every kind that an installed
    distribution declares in :data:`GROUP`; an entry point that names a built-in or product
    kind is refused, with an error in the log, whichever distribution declares it.

    Args:
        extra: More built-in kinds (tests register their own kinds this way).
    """
    return Registry("job kind", (SELFTEST, *extra), group=GROUP, accept=_not_a_kind,
                    error=UnknownNameError, own_targets=product_kind_targets)


#: The job kinds of this installation (see the module docstring).
JOB_KINDS: Registry[JobKind] = job_kind_registry()


def get_kind(name: str) -> JobKind:
    """The job kind called ``name``.

    Raises:
        UnknownNameError: No such kind; the message lists the available ones.
    """
    return JOB_KINDS.get(name)


def find_kind(name: str) -> JobKind | None:
    """The job kind called ``name``, or None when there is none."""
    return JOB_KINDS.get(name) if name in JOB_KINDS else None


def job_kinds() -> list[JobKind]:
    """Every job kind: this wing's first, then the product wings', then the plug-ins'."""
    return JOB_KINDS.entries()
