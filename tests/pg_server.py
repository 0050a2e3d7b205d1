"""A throwaway PostgreSQL cluster for tests and benchmarks.

:class:`ThrowawayCluster` runs ``initdb`` into a temporary folder, starts the server with
``pg_ctl`` listening only on a unix socket in that folder (``listen_addresses=''``), hands out one
database per caller and removes everything on :meth:`stop`. PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` user (Debian's package creates it) via ``runuser``.

Used by the ``pg_url`` fixture in ``conftest.py`` (which fails, never skips, when the server
cannot start) and by ``benchmarks/label_writes.py``.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

#: Where Debian's postgresql package puts the server binaries.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
SUPERUSER = "kbcurate"


class ClusterError(RuntimeError):
    """The throwaway server could not be set up (the message says how to fix it)."""


def find_bin(name: str) -> str:
    """Path of a PostgreSQL server program: on PATH, else in Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(glob.glob(DEBIAN_BIN_GLOB), reverse=True):
        if os.access(Path(folder) / name, os.X_OK):
            return str(Path(folder) / name)
    raise ClusterError(
        f"PostgreSQL's {name} was not found on PATH nor in {DEBIAN_BIN_GLOB}. Install the "
        "server (Debian: apt-get install postgresql; .ci/run does this) and put its bin folder "
        "on PATH")


class ThrowawayCluster:
    """A private PostgreSQL server in a temporary folder (see the module docstring).

    Args:
        settings: Extra ``postgresql.conf`` lines (e.g. ``{"fsync": "off"}`` for fast tests).
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = settings or {}
        self.folder = Path(tempfile.mkdtemp(prefix="kbpg-"))  # short: socket paths are limited
        self.data = self.folder / "data"
        self._as_user = _unprivileged_user()
        self._names = itertools.count(1)
        self.started = False

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", self._as_user, "--"] if self._as_user else []
        result = subprocess.run([*prefix, *argv], capture_output=True, text=True, check=False,
                                timeout=120)
        if result.returncode != 0:
            raise ClusterError(f"{' '.join(argv[:2])} failed ({result.returncode}): "
                               f"{(result.stderr or result.stdout).strip()[-1500:]}")
        return result

    def start(self) -> ThrowawayCluster:
        """``initdb`` + ``pg_ctl start``; raises :class:`ClusterError` naming what failed."""
        initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if self._as_user:
            shutil.chown(self.folder, self._as_user)
        self._run(initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-sync")
        conf = {"listen_addresses": "''", "unix_socket_directories": f"'{self.folder}'",
                "max_connections": "100", **self.settings}
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as fh:
            fh.writelines(f"{key} = {value}\n" for key, value in conf.items())
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w",
                  "-t", "60", "start")
        self.started = True
        return self

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL for ``database`` over the unix socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.folder}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"kb_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1].split("?")[0]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server and delete its folder."""
        try:
            if self.started:
                self._run(find_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                          "stop")
        finally:
            self.started = False
            shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, chars: int = 2000) -> str:
        log = self.folder / "server.log"
        return log.read_text(errors="replace")[-chars:] if log.is_file() else ""


def _unprivileged_user() -> str:
    """The user to run the server as: '' for ourselves, ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return ""
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise ClusterError(
            "running as root, and PostgreSQL refuses to run as root: create a 'postgres' user "
            "(Debian's postgresql package does) or run the tests as another user") from exc
    return "postgres"
