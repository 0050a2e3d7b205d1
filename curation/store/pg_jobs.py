"""The job queue on the workspace's PostgreSQL server, through procrastinate (3.x).

This is the only module that imports procrastinate (the ``postgresql`` extra). It knows one task,
:data:`TASK_NAME`, whose only argument is a kbcurate job id; what running that id means is the
``runner`` the jobs wing hands to :meth:`PgJobBroker.run_worker`
(:mod:`curation.jobs.distributed`).

- **Where**: procrastinate's tables and functions live in the PostgreSQL schema
  :data:`PG_SCHEMA` of the workspace's own database, beside (never among) the workspace tables.
  Every procrastinate connection sets ``search_path`` to it. :meth:`PgJobBroker.ensure_schema`
  creates it once, from procrastinate's own ``schema.sql``, under an advisory lock, so
  concurrent first users (the app, several workers) create it exactly once; the database user
  needs the CREATE privilege on the database for that first time. After upgrading procrastinate,
  apply its migrations to that schema (its documentation, "Migrations").
- **Which queue**: ``kbcurate-<database>`` (:attr:`PgJobBroker.queue`), so a worker serves one
  workspace; each job carries the queueing lock ``kbcurate-job-<id>``, which both keeps one job
  from waiting twice and finds it again (:meth:`PgJobBroker.find`).
- **Workers** (:meth:`PgJobBroker.run_worker`) claim jobs with procrastinate's row locks
  (``SELECT ... FOR UPDATE SKIP LOCKED``), send a heartbeat every ``heartbeat_s`` and poll for
  abort requests; a job whose worker stopped sending heartbeats is reported by
  :meth:`PgJobBroker.find` (``JobManager.get_stalled_jobs``).

Errors of the server (down, wrong URL, no privilege) arrive as
:class:`~curation.store.errors.WorkspaceError` naming the setting (``url`` in ``WS/store.toml``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from curation.store.errors import (
    WorkspaceBusyError,
    WorkspaceError,
    WorkspaceFullError,
    WorkspaceReadOnlyError,
)
from curation.store.postgres import require_psycopg, safe_url, translate_pg_error

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The PostgreSQL schema holding procrastinate's tables, in the workspace's database.
PG_SCHEMA = "procrastinate"
#: The one procrastinate task: run the kbcurate job whose id it is given.
TASK_NAME = "kbcurate.run_job"
#: Key of the advisory lock taken while procrastinate's schema is created.
SCHEMA_LOCK_KEY = 0x6B6271  # "kbq"
CONNECT_TIMEOUT_S = 10
#: procrastinate job states in which the job may still run.
UNFINISHED = ("todo", "doing")

try:  # procrastinate is an optional extra (with psycopg-pool)
    import procrastinate
    import psycopg
    import psycopg_pool
    from procrastinate import exceptions as pc_errors
    from procrastinate.schema import SchemaManager
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    procrastinate = None
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None

#: URLs whose procrastinate schema this process found or created.
_SCHEMA_READY: set[str] = set()
_SCHEMA_GUARD = threading.Lock()

#: ``runner(job_id, abort_reason)``: run the job; ``abort_reason()`` is None until the queue
#: asks the job to stop ("user_request" for a cancel, "shutdown" for a stopping worker).
Runner = Callable[[int, Callable[[], str | None]], None]


def require_procrastinate() -> None:
    """Raises :class:`WorkspaceError` naming the extra when procrastinate is not installed."""
    require_psycopg()
    if _IMPORT_ERROR is not None:
        raise WorkspaceError(
            "This workspace's jobs run through procrastinate on its PostgreSQL server, which "
            "needs: pip install 'kbcurate[postgresql]' (or put jobs = \"table\" in "
            f"WS/store.toml for one worker process per job on this machine) ({_IMPORT_ERROR})"
        ) from _IMPORT_ERROR


@dataclass(frozen=True)
class QueuedJob:
    """procrastinate's record of one kbcurate job.

    Attributes:
        id: procrastinate's job id.
        status: todo, doing, succeeded, failed, cancelled or aborted.
        worker_id: The procrastinate worker running it (None when none is, or it was pruned).
        stalled: It is ``doing`` but its worker sent no heartbeat within the limit asked for.
    """

    id: int
    status: str
    worker_id: int | None
    stalled: bool = False


class PgJobBroker:
    """procrastinate on one workspace database (see the module docstring).

    Args:
        url: The workspace database (``postgresql://USER@HOST:PORT/DATABASE``).
        setting: Where ``url`` is configured, named in every error.

    Raises:
        WorkspaceError: psycopg or procrastinate is not installed.
    """

    def __init__(self, url: str, setting: str) -> None:
        require_procrastinate()
        self.url = url
        self.setting = setting
        self.where = safe_url(url)

    @property
    def queue(self) -> str:
        """The procrastinate queue of this workspace: ``kbcurate-<database>``."""
        database = self.where.rsplit("/", 1)[-1]
        return f"kbcurate-{database}"[:128] if database else "kbcurate"

    @staticmethod
    def lock_of(job_id: int) -> str:
        """The queueing lock of kbcurate job ``job_id``."""
        return f"kbcurate-job-{int(job_id)}"

    # -- schema ----------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Create procrastinate's schema in the workspace database unless it is there.

        Raises:
            WorkspaceError: The server cannot be reached, or the user may not create schemas.
        """
        with _SCHEMA_GUARD:
            if self.url in _SCHEMA_READY:
                return
            try:
                self._create_schema()
            except psycopg.Error as exc:
                raise self._error(exc, f"cannot create the job queue's schema {PG_SCHEMA!r} "
                                       "(the first job needs the CREATE privilege on the "
                                       "database, or jobs = \"table\" in WS/store.toml)"
                                  ) from exc
            _SCHEMA_READY.add(self.url)

    def _create_schema(self) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                             application_name="kbcurate-jobs") as pg:
            pg.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
            try:
                found = pg.execute("SELECT to_regclass(%s)",
                                   (f"{PG_SCHEMA}.procrastinate_jobs",)).fetchone()
                if found and found[0] is not None:
                    return
                with pg.transaction():
                    pg.execute(f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}")
                    pg.execute(f"SET LOCAL search_path = {PG_SCHEMA}")
                    pg.execute(SchemaManager.get_schema())
                logger.info("created procrastinate's schema %r in %s", PG_SCHEMA, self.where)
            finally:
                pg.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))

    # -- what submitters and readers ask --------------------------------------------------
    def defer(self, job_id: int) -> int:
        """Queue kbcurate job ``job_id`` for a worker; returns procrastinate's job id."""

        async def defer(app: Any) -> int:
            task = app.configure_task(TASK_NAME, queue=self.queue,
                                      queueing_lock=self.lock_of(job_id))
            try:
                return int(await task.defer_async(job_id=int(job_id)))
            except pc_errors.AlreadyEnqueued:  # handed over before: keep that one
                jobs = await app.job_manager.list_jobs_async(queueing_lock=self.lock_of(job_id))
                return int(jobs[-1].id)

        return self._call(defer)

    def find(self, job_id: int, *, stalled_after_s: float | None = None) -> QueuedJob | None:
        """procrastinate's latest job for kbcurate job ``job_id`` (None when it has none).

        Args:
            job_id: The kbcurate job.
            stalled_after_s: Also tell whether its worker sent no heartbeat for this long
                (``JobManager.get_stalled_jobs``); None skips that question.
        """

        async def find(app: Any) -> QueuedJob | None:
            jobs = await app.job_manager.list_jobs_async(queue=self.queue,
                                                         queueing_lock=self.lock_of(job_id))
            if not jobs:
                return None
            job = jobs[-1]
            status = str(getattr(job.status, "value", job.status))
            stalled = False
            if status == "doing" and stalled_after_s is not None:
                stale = await app.job_manager.get_stalled_jobs(
                    queue=self.queue, task_name=TASK_NAME,
                    seconds_since_heartbeat=stalled_after_s)
                stalled = any(s.id == job.id for s in stale)
            return QueuedJob(int(job.id), status, job.worker_id, stalled)

        return self._call(find)

    def cancel(self, queued_id: int) -> bool:
        """Cancel a waiting job, or ask its worker to abort a running one (procrastinate's
        ``cancel_job_by_id(abort=True)``); False when it was no longer todo or doing."""

        async def cancel(app: Any) -> bool:
            return bool(await app.job_manager.cancel_job_by_id_async(queued_id, abort=True))

        return self._call(cancel)

    def fail(self, queued_id: int) -> None:
        """Record a running job whose worker is gone as failed (it is not run again)."""

        async def fail(app: Any) -> None:
            try:
                await app.job_manager.finish_job_by_id_async(
                    queued_id, status=procrastinate.jobs.Status.FAILED, delete_job=False)
            except pc_errors.ConnectorException as exc:  # it ended meanwhile
                if "not found" not in str(_psycopg_cause(exc)):
                    raise
                logger.info("procrastinate job %d had already ended", queued_id)

        self._call(fail)

    # -- workers ----------------------------------------------------------------------------
    def run_worker(self, runner: Runner, *, concurrency: int = 1, wait: bool = True,
                   name: str | None = None, heartbeat_s: float = 10.0,
                   stalled_after_s: float = 30.0) -> None:
        """Serve this workspace's queue in this process until stopped (Ctrl+C, SIGTERM) or,
        without ``wait``, until no job is left.

        Args:
            runner: Runs one kbcurate job (in a thread of its own; ``concurrency`` at a time).
            concurrency: Jobs run at the same time.
            wait: Keep waiting for new jobs.
            name: The worker's name in procrastinate's logs.
            heartbeat_s: Seconds between heartbeats.
            stalled_after_s: Workers silent for this long are pruned when this one starts.

        Raises:
            WorkspaceError: The server cannot be reached (the message names the setting).
        """
        self.ensure_schema()
        app = self._app(min_size=1, max_size=max(4, concurrency + 3))

        @app.task(name=TASK_NAME, queue=self.queue, pass_context=True)
        def run_kbcurate_job(context: Any, job_id: int) -> None:
            def abort_reason() -> str | None:
                reason = context.abort_reason()
                return None if reason is None else str(reason.value)

            runner(int(job_id), abort_reason)
            if context.should_abort():
                raise pc_errors.JobAborted(f"kbcurate job {job_id} stopped on request")

        in_main = threading.current_thread() is threading.main_thread()
        try:
            app.run_worker(queues=[self.queue], concurrency=max(1, concurrency), wait=wait,
                           name=name, update_heartbeat_interval=heartbeat_s,
                           stalled_worker_timeout=stalled_after_s,
                           install_signal_handlers=in_main)
        except (pc_errors.ConnectorException, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise self._error(exc, "the job worker lost or could not open its connection"
                              ) from exc

    # -- plumbing ---------------------------------------------------------------------------
    def _app(self, **pool_args: Any) -> Any:
        """A procrastinate App on this database, its connections in :data:`PG_SCHEMA`."""
        connector = procrastinate.PsycopgConnector(
            conninfo=self.url,
            kwargs={"options": f"-c search_path={PG_SCHEMA}", "connect_timeout":
                    CONNECT_TIMEOUT_S, "application_name": "kbcurate-jobs"},
            **pool_args)
        return procrastinate.App(connector=connector)

    def _call(self, action: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``action(app)`` on an App opened for this call (one connection per query, so
        an error arrives at once instead of after a pool's retries)."""
        self.ensure_schema()

        async def session() -> T:
            app = self._app(pool_factory=psycopg_pool.AsyncNullConnectionPool)
            async with app.open_async():
                return await action(app)

        try:
            return _run_sync(session)
        except (pc_errors.ConnectorException, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise self._error(exc, "the job queue cannot be reached") from exc

    def _error(self, exc: BaseException, what: str) -> WorkspaceError:
        """The user-facing error for a failed procrastinate call (names the setting)."""
        cause = _psycopg_cause(exc) or exc
        translated = translate_pg_error(cause, self.where, self.setting)
        if isinstance(translated, WorkspaceBusyError | WorkspaceReadOnlyError |
                      WorkspaceFullError):
            return translated
        detail = " ".join(str(cause).split()) or type(cause).__name__
        return WorkspaceError(
            f"Job queue of the workspace database {self.where} set in {self.setting}: {what} "
            f"({detail}). Check that the PostgreSQL server runs and that the URL is right "
            "(postgresql://USER@HOST:PORT/DATABASE; the password comes from PGPASSWORD or "
            "~/.pgpass)")


def _psycopg_cause(exc: BaseException) -> BaseException | None:
    """The psycopg error behind ``exc`` (procrastinate wraps them), if any."""
    seen = exc
    while seen is not None:
        if isinstance(seen, psycopg.Error):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _run_sync(session: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``session()`` to its end from synchronous code (in a helper thread
    when this thread already runs an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(session())
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(session())).result()
