"""The registry of background job kinds: what each runs, who may start it, which parameters
it accepts and how its values are checked (see :mod:`curation.jobs.queue`).

Job kinds register themselves: each wing that has background work declares its kinds as a
tuple ``JOB_KINDS`` of :class:`JobKind` in its own ``job_kinds`` module and names that tuple in
the entry-point group :data:`GROUP` of its distribution (``pyproject.toml``)::

    [project.entry-points."kbcurate.job_kinds"]
    mywing = "mypackage.job_kinds:JOB_KINDS"

:data:`JOB_KINDS` (a :class:`~kb_sources.plugins.Registry`) holds this wing's own kind,
``selftest``, and reads the group when first asked. A kind names its function and validator as
``module:function``, imported only when a job runs or is submitted
(:func:`~kb_sources.plugins.load_target`), so this wing imports no job's code. Look kinds up
with :func:`get_kind` (an unknown name raises :class:`~kb_sources.errors.UnknownNameError`
listing the available ones) or :func:`find_kind`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from curation.access.users import Role, User
from curation.jobs.guards import check_params
from curation.store.workspace import Workspace
from kb_sources.errors import UnknownNameError
from kb_sources.plugins import Registry, load_target

#: The entry-point group in which installed distributions declare job kinds.
GROUP = "kbcurate.job_kinds"
#: The product's own distribution: its entry points in :data:`GROUP` (the wings' kinds) are
#: built-ins, so a plug-in can never replace ``activate``, ``rank`` or any other product kind.
PRODUCT = "kbcurate"

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
    """

    name: str
    target: str
    description: str
    admin_only: bool = True
    roles: frozenset[Role] = frozenset()
    params: tuple[str, ...] = ()
    validator: str | None = None
    unique_by: tuple[str, ...] = ()

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


#: This wing's own kind: a diagnostic job (:func:`curation.jobs.queue.selftest`).
SELFTEST = JobKind("selftest", "curation.jobs.queue:selftest",
                   "check that background workers start and report progress", params=("steps",))


def _not_a_kind(entry: object) -> str | None:
    """Why a plug-in's entry is refused (it is not a :class:`JobKind`), or None."""
    if isinstance(entry, JobKind):
        return None
    return f"expected a JobKind, got {type(entry).__name__}"


def job_kind_registry(extra: Iterable[JobKind] = ()) -> Registry[JobKind]:
    """A registry of job kinds: ``selftest``, ``extra`` and the kinds of the product's own
    distribution (:data:`PRODUCT`) built in, then every kind that another installed
    distribution declares in :data:`GROUP`; a plug-in that names a built-in kind is refused,
    with an error in the log.

    Args:
        extra: More built-in kinds (tests register their own kinds this way).
    """
    return Registry("job kind", (SELFTEST, *extra), group=GROUP, accept=_not_a_kind,
                    error=UnknownNameError, builtin_distributions=(PRODUCT,))


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
    """Every job kind: this wing's first, then those of installed distributions."""
    return JOB_KINDS.entries()
