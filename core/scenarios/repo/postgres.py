"""A throw-away PostgreSQL server per run: unix socket only, one database and role per sample.

Usage::

    with PostgresService() as pg:              # initdb + start (about a second)
        with pg.database("sample-1") as db:   # CREATE ROLE + CREATE DATABASE ... TEMPLATE
            run_tests(..., env=db.env)         # DATABASE_URL, PGHOST, PGDATABASE, PGUSER, PGPASSWORD
                                               # DROP DATABASE (FORCE) + DROP ROLE on exit

What it guarantees:

* the server runs Debian's binaries (``/usr/lib/postgresql/<major>/bin``, installed by
  ``.ci/postgres-deps.sh``) as the unprivileged user ``ianvs-postgres`` when the harness is
  root (postgres refuses root), with ``listen_addresses=''``: **no TCP**; its only endpoint is
  ``<run dir>/sock/.s.PGSQL.5432``;
* everything lives in one temporary directory ``<base>/ianvs-pg-<harness pid>-<random>`` (data,
  socket, log); :meth:`PostgresService.close` stops the server (fast shutdown, SIGKILL of its
  process group after ``stop_timeout``) and removes that directory. ``close`` runs on normal exit,
  on exceptions, on ``KeyboardInterrupt`` and -- while a service is open in the main thread -- on
  SIGTERM (turned into ``SystemExit``). The server gets ``PR_SET_PDEATHSIG=SIGQUIT`` (immediate
  shutdown) so a SIGKILLed harness does not leave it running; directories of dead harnesses are
  swept at the next start (:func:`sweep_stale`);
* authentication is ``scram-sha-256`` everywhere: the superuser ``ianvs`` (password known only to
  this process) and, per sample, a role that may log in only to the database of the same name
  (``pg_hba``: ``sameuser``), is not superuser and cannot create databases or roles. The template
  database is owned by the superuser with ``CONNECT`` revoked from ``PUBLIC``: a sample cannot
  connect to another sample's database, nor to the template, nor drop either;
* ``template_sql`` (optional) is run once in the template; every sample database is a copy.

Administrative SQL goes through ``psql`` (one short process per statement batch): the harness needs
no database driver of its own.
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Iterator

from core.common.errors import IanvsError
from core.common.lifetime import die_with_parent
from core.scenarios.repo.leftovers import PG_PREFIX
# the docker backend's liveness check of a folder's owner pid serves the same sweep here

__all__ = ["PostgresService", "PostgresDatabase", "PostgresUnavailable", "find_binaries", "sweep_stale",
           "SERVICE_USER", "DEPS_SCRIPT"]

LOG = logging.getLogger(__name__)

SERVICE_USER = "ianvs-postgres"
DEPS_SCRIPT = ".ci/postgres-deps.sh"
SUPERUSER = "ianvs"
TEMPLATE = "ianvs_template"
_NAME_RE = re.compile(r"[^a-z0-9_]")


class PostgresUnavailable(IanvsError):
    """PostgreSQL's server binaries (or the service user) are missing."""


def find_binaries() -> Path:
    """The ``bin`` directory of the newest installed PostgreSQL server (Debian layout, then PATH).

    Raises :class:`PostgresUnavailable` naming the install script when none is found.
    """
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path and Path(on_path).resolve().with_name("postgres").exists():
        return Path(on_path).resolve().parent
    raise PostgresUnavailable("PostgreSQL server binaries (initdb, postgres) not found",
                              hint=f"run {DEPS_SCRIPT} as root (installs Debian's postgresql and the "
                                   f"{SERVICE_USER} user)")


def ensure_service_user(name: str = SERVICE_USER) -> pwd.struct_passwd:
    """The system user ``name`` (root only), created on first use the way ``.ci/postgres-deps.sh``
    creates it (``useradd --system``, no home, no login shell), so the tests and jobs of a fresh
    machine need no set-up step for it. Raises :class:`PostgresUnavailable` when it cannot be
    created (no ``useradd``, or it fails)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or ("/usr/sbin/useradd" if Path("/usr/sbin/useradd").exists() else None)
    if useradd is None:
        raise PostgresUnavailable(f"running as root and there is no user {name!r} for the server (no useradd "
                                  "to create it)", hint=f"run {DEPS_SCRIPT} as root")
    done = subprocess.run([useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent",
                           "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True, check=False)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PostgresUnavailable(f"running as root and the user {name!r} for the server could not be created: "
                                  f"{(done.stderr or done.stdout).strip()[:200]}",
                                  hint=f"run {DEPS_SCRIPT} as root") from None
    LOG.info("created the system user %s for the PostgreSQL service (as %s does)", name, DEPS_SCRIPT)
    return entry


def _service_ids() -> tuple[int, int] | None:
    """(uid, gid) the server runs as: ``ianvs-postgres`` when we are root (created on first use:
    :func:`ensure_service_user`), else ``None`` (ourselves)."""
    if os.geteuid() != 0:
        return None
    entry = ensure_service_user()
    return entry.pw_uid, entry.pw_gid


def sweep_stale(base: Path) -> int:
    """Remove run directories under ``base`` whose harness process is dead (its server got
    SIGQUIT through the death signal). Kills a server still found on such a directory first.
    Returns how many were removed (:mod:`.leftovers` does the work)."""
    from core.scenarios.repo.leftovers import postgres_dirs, remove_postgres

    removed = sum(1 for item in postgres_dirs(str(base))
                  if not item.alive and item.owner is not None and remove_postgres(item.name))
    if removed:
        LOG.info("removed %d PostgreSQL run directories of dead harnesses under %s", removed, base)
    return removed


@dataclass(frozen=True)
class PostgresDatabase:
    """One sample's database: its name, role, password and socket directory."""
    name: str
    role: str
    password: str
    socket_dir: Path

    @property
    def url(self) -> str:
        """SQLAlchemy/libpq URL over the unix socket (``host=`` query parameter)."""
        return f"postgresql://{self.role}:{self.password}@/{self.name}?host={self.socket_dir}"

    @property
    def env(self) -> dict[str, str]:
        """Variables a test process gets: ``DATABASE_URL`` plus libpq's standard ``PG*`` ones."""
        return {"DATABASE_URL": self.url, "PGHOST": str(self.socket_dir), "PGDATABASE": self.name,
                "PGUSER": self.role, "PGPASSWORD": self.password}


@dataclass
class _Stats:
    start_s: float = 0.0
    created: list[float] = field(default_factory=list)
    dropped: list[float] = field(default_factory=list)


class PostgresService:
    """A private PostgreSQL server for one run (see the module docstring).

    Parameters: ``base`` -- where the run directory goes (default: the system temp dir);
    ``template_sql`` -- SQL run once in the template database; ``start_timeout`` /
    ``stop_timeout`` -- seconds; ``strategy`` -- how ``CREATE DATABASE`` copies the template
    (``FILE_COPY``: file copy plus a checkpoint, cheap with ``fsync=off``; ``WAL_LOG``: block by
    block through the WAL; ``benchmarks/postgres_service.py`` compares them); ``lock_timeout_s``
    and ``idle_in_transaction_s`` -- the server's ``lock_timeout`` and
    ``idle_in_transaction_session_timeout``: code that deadlocks against its own second
    connection (a blanked body leaving a transaction open while another connection of the same
    test waits for its lock) fails in seconds instead of hanging until the sample's timeout.
    Thread-safe: :meth:`create_database` and :meth:`drop_database`
    may be called from several threads.
    """

    def __init__(self, base: Path | None = None, template_sql: str | None = None,
                 start_timeout: float = 30.0, stop_timeout: float = 10.0, strategy: str = "FILE_COPY",
                 lock_timeout_s: float = 10.0, idle_in_transaction_s: float = 5.0) -> None:
        self.lock_timeout_s = lock_timeout_s
        self.idle_in_transaction_s = idle_in_transaction_s
        if strategy not in ("FILE_COPY", "WAL_LOG"):
            raise ValueError(f"strategy must be FILE_COPY or WAL_LOG, not {strategy!r}")
        self.strategy = strategy
        self.bindir = find_binaries()
        self._ids = _service_ids()
        self.base = Path(base or tempfile.gettempdir())
        self.template_sql = template_sql
        self.start_timeout = start_timeout
        #: seconds any one client command (initdb, psql, pg_isready) may take before it is an error
        self.command_timeout = max(60.0, start_timeout * 4)
        self.stop_timeout = stop_timeout
        self.run_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._password = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._live: dict[str, PostgresDatabase] = {}
        self._counter = 0
        self._old_sigterm: object = None
        self.stats = _Stats()

    # ------------------------------------------------------------------ paths
    @property
    def socket_dir(self) -> Path:
        """The directory holding the server's only endpoint (``.s.PGSQL.5432``)."""
        assert self.run_dir is not None, "service not started"
        return self.run_dir / "sock"

    @property
    def data_dir(self) -> Path:
        assert self.run_dir is not None, "service not started"
        return self.run_dir / "data"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "PostgresService":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


    def _run(self, argv: list[str], *, input_text: str | None = None, check: bool = True,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self._ids is not None:
            kwargs = {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        full_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **(env or {})}
        try:
            proc = subprocess.run(argv, input=input_text, capture_output=True, text=True, env=full_env,
                                  cwd="/", timeout=self.command_timeout, **kwargs)  # type: ignore[call-overload]
        except subprocess.TimeoutExpired as exc:
            raise IanvsError(f"PostgreSQL service: {Path(argv[0]).name} did not finish within "
                             f"{self.command_timeout:.0f}s; the server's log ends: {self._log_tail()}") from exc
        if check and proc.returncode != 0:
            raise IanvsError(f"PostgreSQL service: {Path(argv[0]).name} failed: "
                             f"{(proc.stderr or proc.stdout).strip()[-800:]}")
        return proc  # type: ignore[no-any-return]

    def _chown(self, path: Path) -> None:
        if self._ids is not None:
            os.chown(path, *self._ids)

    def start(self) -> None:
        """initdb, start the server on the unix socket, create the template. Idempotent."""
        if self._proc is not None:
            return
        t0 = time.perf_counter()
        self.base.mkdir(parents=True, exist_ok=True)
        sweep_stale(self.base)
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"{PG_PREFIX}{os.getpid()}-", dir=self.base))
        try:
            self._install_sigterm()
            self.run_dir.chmod(0o755)  # the server's user and sandboxed samples traverse it
            self._chown(self.run_dir)
            for sub, mode in (("sock", 0o755), ("data", 0o700)):
                (self.run_dir / sub).mkdir(mode=mode)
                self._chown(self.run_dir / sub)
            pwfile = self.run_dir / "pw"
            pwfile.write_text(self._password + "\n")
            pwfile.chmod(0o600)
            self._chown(pwfile)
            self._run([str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                       f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                       "--no-sync", "--no-instructions"])
            pwfile.unlink()
            (self.data_dir / "pg_hba.conf").write_text(
                "# written by core/scenarios/repo/postgres.py: unix socket only, passwords always\n"
                f"local all {SUPERUSER} scram-sha-256\n"
                "local sameuser all scram-sha-256\n")
            self._launch()
            self._psql(f"CREATE DATABASE {TEMPLATE};\n"
                       f"REVOKE ALL ON DATABASE {TEMPLATE} FROM PUBLIC;\n"
                       "REVOKE ALL ON DATABASE postgres FROM PUBLIC;\n"
                       "REVOKE ALL ON DATABASE template1 FROM PUBLIC;\n")
            if self.template_sql:
                self._psql(self.template_sql, database=TEMPLATE)
            self._psql(f"ALTER DATABASE {TEMPLATE} WITH IS_TEMPLATE true;")
        except BaseException:
            self.close()
            raise
        self.stats.start_s = time.perf_counter() - t0
        LOG.info("PostgreSQL service up in %.2fs (pid %s, socket %s, no TCP)", self.stats.start_s,
                 self.pid, self.socket_dir)

    def _launch(self) -> None:
        kwargs: dict[str, object] = {}
        if self._ids is not None:
            kwargs = {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        log = open(self.run_dir / "server.log", "wb")  # type: ignore[operator]
        try:
            self._proc = subprocess.Popen(  # type: ignore[call-overload]
                [str(self.bindir / "postgres"), "-D", str(self.data_dir),
                 "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                 "-c", "unix_socket_permissions=0777", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "dynamic_shared_memory_type=mmap",
                 "-c", "max_connections=100", "-c", "logging_collector=off",
                 "-c", f"lock_timeout={int(self.lock_timeout_s * 1000)}",
                 "-c", f"idle_in_transaction_session_timeout={int(self.idle_in_transaction_s * 1000)}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
                cwd="/", start_new_session=True, preexec_fn=die_with_parent(signal.SIGQUIT), **kwargs)
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise IanvsError("PostgreSQL service: the server exited at start: " + self._log_tail())
            ready = self._run([str(self.bindir / "pg_isready"), "-q", "-h", str(self.socket_dir),
                               "-U", SUPERUSER], check=False)
            if ready.returncode == 0:
                return
            time.sleep(0.05)
        raise IanvsError(f"PostgreSQL service: not ready after {self.start_timeout:.0f}s; the "
                         "server's log ends: " + self._log_tail())

    def _log_tail(self, chars: int = 800) -> str:
        try:
            return (self.run_dir / "server.log").read_text(errors="replace")[-chars:]  # type: ignore[operator]
        except OSError as exc:
            return f"(no log: {exc})"

    def _psql(self, sql: str, database: str = "postgres") -> str:
        out = self._run([str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                         "-At", "-h", str(self.socket_dir), "-U", SUPERUSER, "-d", database, "-f", "-"],
                        input_text=sql, env={"PGPASSWORD": self._password})
        return out.stdout

    def query(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser; return psql's unaligned output (for tests and diagnosis)."""
        return self._psql(sql, database)

    def close(self) -> None:
        """Stop the server and remove the run directory (idempotent; never raises)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGINT)  # fast shutdown: ends sessions, removes the socket
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                LOG.warning("PostgreSQL service: no fast shutdown in %.0fs; killing it", self.stop_timeout)
            except ProcessLookupError:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            LOG.info("PostgreSQL service stopped; removed %s", self.run_dir)
            self.run_dir = None
        self._live.clear()
        self._restore_sigterm()

    # SIGTERM -> SystemExit while a service is open in the main thread, so ``with`` blocks unwind
    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            def _term(signum: int, frame: FrameType | None) -> None:
                raise SystemExit(128 + signum)
            self._old_sigterm = signal.signal(signal.SIGTERM, _term)

    def _restore_sigterm(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)  # type: ignore[arg-type]
            self._old_sigterm = None

    # ------------------------------------------------------------------ per-sample databases
    def create_database(self, label: str = "") -> PostgresDatabase:
        """A fresh database copied from the template, owned by a fresh role of the same name."""
        if self._proc is None:
            raise IanvsError("PostgreSQL service: create_database before start()")
        with self._lock:
            self._counter += 1
            name = f"s{self._counter}_" + _NAME_RE.sub("_", label.lower())[:40]
        db = PostgresDatabase(name=name.rstrip("_"), role=name.rstrip("_"), password=secrets.token_hex(16),
                              socket_dir=self.socket_dir)
        t0 = time.perf_counter()
        self._psql(f"CREATE ROLE {db.role} LOGIN PASSWORD '{db.password}' "
                   "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;\n"
                   f"CREATE DATABASE {db.name} OWNER {db.role} TEMPLATE {TEMPLATE} STRATEGY {self.strategy};\n")
        elapsed = time.perf_counter() - t0
        with self._lock:
            self._live[db.name] = db
            self.stats.created.append(elapsed)
        LOG.debug("database %s created in %.3fs", db.name, elapsed)
        return db

    def drop_database(self, db: PostgresDatabase) -> None:
        """Drop the database (terminating sessions left behind) and its role. Idempotent."""
        with self._lock:
            if self._live.pop(db.name, None) is None:
                return
        t0 = time.perf_counter()
        self._psql(f"DROP DATABASE IF EXISTS {db.name} WITH (FORCE);\nDROP ROLE IF EXISTS {db.role};\n")
        with self._lock:
            self.stats.dropped.append(time.perf_counter() - t0)

    @contextmanager
    def database(self, label: str = "") -> Iterator[PostgresDatabase]:
        """:meth:`create_database` ... :meth:`drop_database`, also when the body raises."""
        db = self.create_database(label)
        try:
            yield db
        finally:
            if self._proc is not None:
                self.drop_database(db)

    def databases(self) -> list[str]:
        """Names of the databases that exist now (template and sample ones included)."""
        return self._psql("SELECT datname FROM pg_database ORDER BY 1;").split()
