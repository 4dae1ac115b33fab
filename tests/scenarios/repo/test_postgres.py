"""The PostgreSQL service of the repo kind, for real: Debian's server started per run on a unix
socket, a database per sample from a template, nothing left behind -- also after failing,
crashing and timed-out samples, after SIGTERM and after SIGKILL of the harness -- and samples in
the real sandbox reach their own database through the ``socket_dirs`` allowance and nothing else.

Skipped (naming .ci/postgres-deps.sh) where PostgreSQL is not installed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable, find_binaries
from core.testenvmanager.sandbox import ExecRequest, get_executor
from core.testenvmanager.sandbox.types import ExecMode

#: the shipped dataset sets' environment (psycopg 3 included), also used here
DB_REQUIREMENTS = ["SQLAlchemy==2.1.9", "alembic==1.20.1", "psycopg==3.3.9", "psycopg-binary==3.3.9"]
BASE_DATABASES = ["ianvs_template", "postgres", "template0", "template1"]
ROOT = Path(__file__).resolve().parents[3]

try:
    find_binaries()
except PostgresUnavailable as _exc:
    pytest.skip(_exc.render(), allow_module_level=True)


@pytest.fixture(scope="module")
def db_env() -> RepoEnv:
    return ensure_env(DB_REQUIREMENTS)


def _postgres_pids(run_dir: Path) -> list[int]:
    """Processes whose command line names ``run_dir`` (the postmaster and its children)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if str(run_dir) in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(entry))
            except OSError:
                pass
    return out


def _tcp_listeners(pid: int) -> list[str]:
    """TCP sockets (v4/v6) held by ``pid``: matched by inode against /proc/net/tcp*."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[9] in inodes:
                found.append(line)
    return found


def _assert_gone(run_dir: Path, socket_dir: Path) -> None:
    deadline = time.monotonic() + 10
    while _postgres_pids(run_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postgres_pids(run_dir) == []
    assert not run_dir.exists() and not (socket_dir / ".s.PGSQL.5432").exists()


def test_service_lifecycle_socket_only(pg_base: Path) -> None:
    with PostgresService(base=pg_base, template_sql="CREATE TABLE seed (x int); INSERT INTO seed VALUES (7);") as pg:
        run_dir, sock = pg.run_dir, pg.socket_dir
        assert run_dir is not None and pg.pid is not None
        assert (sock / ".s.PGSQL.5432").is_socket()
        assert pg.query("SHOW listen_addresses;").strip() == ""
        assert _tcp_listeners(pg.pid) == []
        with pg.database("one") as a, pg.database("two") as b:
            assert a.name != b.name and a.password != b.password
            assert pg.query("SELECT x FROM seed;", database=a.name).strip() == "7"  # copied from the template
            pg.query("INSERT INTO seed VALUES (8);", database=a.name)
            assert pg.query("SELECT count(*) FROM seed;", database=b.name).strip() == "1"
            assert sorted(pg.databases()) == sorted([*BASE_DATABASES, a.name, b.name])
        assert sorted(pg.databases()) == BASE_DATABASES
        assert len(pg.stats.created) == 2 and len(pg.stats.dropped) == 2
    _assert_gone(run_dir, sock)


def test_missing_binaries_name_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    import core.scenarios.repo.postgres as mod
    monkeypatch.setattr(mod.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    with pytest.raises(PostgresUnavailable, match="postgres-deps.sh"):
        PostgresService()


# SIGINT gets Python's own handler back (a shell starts background jobs with SIGINT ignored)
_HARNESS = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from core.scenarios.repo.postgres import PostgresService
with PostgresService(base=Path(sys.argv[1])) as pg:
    db = pg.create_database("held")
    print(pg.run_dir, pg.socket_dir, flush=True)
    time.sleep(300)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_harness_signals_leave_nothing(pg_base: Path, sig: int) -> None:
    """SIGTERM and Ctrl-C unwind the ``with`` block; after SIGKILL the server gets its death
    signal and the next service start sweeps the dead harness's directory."""
    proc = subprocess.Popen([sys.executable, "-c", _HARNESS, str(pg_base)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stderr is not None
        started = proc.stdout.readline().split()
        if len(started) != 2:  # the service did not start: say why, not "not enough values"
            proc.kill()
            pytest.fail(f"the harness's PostgreSQL service did not start: {proc.stderr.read()[-2000:]}")
        run_dir, sock = map(Path, started)
        assert _postgres_pids(run_dir)
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGKILL:
        deadline = time.monotonic() + 10
        while _postgres_pids(run_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _postgres_pids(run_dir) == []  # PR_SET_PDEATHSIG: the server quit with its harness
        assert run_dir.exists()  # ... but nobody removed the directory yet
        with PostgresService(base=pg_base):
            assert not run_dir.exists()  # swept at the next start
    _assert_gone(run_dir, sock)


# --------------------------------------------------------------------------- in the sandbox

_PROBE = """
import json, socket, sys
sys.path.insert(0, {site!r})
import psycopg
own, other, host = {own!r}, {other!r}, {host!r}
out = {{}}
try:
    socket.socket(socket.AF_UNIX).close()
except PermissionError:
    print("unix sockets refused", flush=True)
    raise
with psycopg.connect(own["url"], autocommit=True) as c:
    c.execute("CREATE TABLE mine (x int)")
    out["own"] = c.execute("SELECT current_database()").fetchone()[0]
    for name in ("ianvs_template", other["name"]):
        try:
            c.execute(f"DROP DATABASE {{name}}")
            out["drop_" + name] = "dropped"
        except psycopg.Error as exc:
            out["drop_" + name] = type(exc).__name__
def attempt(user, password, dbname):
    try:
        psycopg.connect(host=own["host"], user=user, password=password, dbname=dbname).close()
        return "connected"
    except psycopg.Error as exc:
        return " ".join(str(exc).split())[-300:]
out["other_db_own_creds"] = attempt(own["user"], own["password"], other["name"])
out["template_own_creds"] = attempt(own["user"], own["password"], "ianvs_template")
out["postgres_db_own_creds"] = attempt(own["user"], own["password"], "postgres")
out["superuser_guess"] = attempt("ianvs", own["password"], "postgres")
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(host)
    out["host_socket"] = "connected"
except OSError as exc:
    out["host_socket"] = type(exc).__name__
print(json.dumps(out))
"""


def test_sandboxed_sample_reaches_only_its_own_database(db_env: RepoEnv, pg_base: Path, tmp_path: Path) -> None:
    site = db_env.site_packages()
    host_dir = Path(tempfile.mkdtemp(prefix="hostsock-", dir="/tmp"))
    host_dir.chmod(0o755)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(host_dir / "s"))
    os.chmod(host_dir / "s", 0o777)
    listener.listen()
    try:
        with PostgresService(base=pg_base) as pg, pg.database("a") as a, pg.database("b") as b:
            own = {"url": a.url, "host": str(a.socket_dir), "user": a.role, "password": a.password, "name": a.name}
            program = _PROBE.format(site=site, own=own, other={"name": b.name}, host=str(host_dir / "s"))
            req = ExecRequest(id="probe", mode=ExecMode.SCRIPT, program=program, test="", timeout=60, memory_mb=1024)
            with get_executor("local", workers=1, min_isolation="kernel", python=str(db_env.python),
                              hide_packages=False, read_paths=[site], socket_dirs=[str(pg.socket_dir)],
                              audit_hook=False) as ex:
                (res,) = list(ex.run([req]))
            assert res.outcome.value == "passed", res.stderr[-2000:]
            got = json.loads(res.stdout.strip().splitlines()[-1])
            assert got["own"] == a.name
            assert got["drop_ianvs_template"] != "dropped" and got[f"drop_{b.name}"] != "dropped"
            for key in ("other_db_own_creds", "template_own_creds", "postgres_db_own_creds", "superuser_guess"):
                assert got[key] != "connected", (key, got[key])
            assert "no pg_hba.conf entry" in got["other_db_own_creds"]
            assert "password authentication failed" in got["superuser_guess"]
            assert got["host_socket"] == "FileNotFoundError"  # a host socket under /tmp stays invisible
            assert {"ianvs_template", b.name} <= set(pg.databases())
            assert pg.query("SELECT count(*) FROM pg_tables WHERE tablename = 'mine';", database=a.name).strip() == "1"

            # without the allowance the same sandbox refuses unix sockets outright
            with get_executor("local", workers=1, min_isolation="kernel", python=str(db_env.python),
                              hide_packages=False, read_paths=[site], audit_hook=False) as ex:
                (res2,) = list(ex.run([ExecRequest(id="plain", mode=ExecMode.SCRIPT, program=program, test="",
                                                   timeout=60, memory_mb=1024)]))
            assert res2.outcome.value != "passed"
            assert res2.stdout.strip() == "unix sockets refused", (res2.stdout, res2.detail)
    finally:
        listener.close()
        subprocess.run(["rm", "-rf", str(host_dir)], check=False)


# --------------------------------------------------------------------------- samples that misbehave

DB_LIB = '''\
"""A tiny key-value store over PostgreSQL (DATABASE_URL)."""
import os

import psycopg


def connect():
    return psycopg.connect(os.environ["DATABASE_URL"])


def save(conn, key, value):
    """Create table kv (k text primary key, v text) if missing and insert (key, value)."""
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS kv (k text PRIMARY KEY, v text)")
        cur.execute("INSERT INTO kv VALUES (%s, %s)", (key, value))
    conn.commit()
'''

DB_TESTS = '''\
from dblib.store import connect, save


def test_fresh_database_then_save():
    conn = connect()
    assert conn.execute("SELECT to_regclass('kv')").fetchone()[0] is None  # nothing from other samples
    save(conn, "a", "1")
    assert conn.execute("SELECT k, v FROM kv").fetchall() == [("a", "1")]
'''

LEAVE_TABLE = '''\
def save(conn, key, value):
    conn.execute("CREATE TABLE kv (k text PRIMARY KEY, v text)")
    conn.execute("INSERT INTO kv VALUES ('leak', 'x')")
    conn.commit()
    raise RuntimeError("fails after writing")
'''
CRASH = "def save(conn, key, value):\n    import os\n    conn.execute('CREATE TABLE kv (k text)')\n    conn.commit()\n    os.abort()\n"
HANG = ("def save(conn, key, value):\n    import time\n    conn.execute('CREATE TABLE kv (k text)')\n"
        "    conn.execute('LOCK TABLE kv')\n    time.sleep(600)\n")


@pytest.mark.slow
def test_lifecycle_survives_failing_crashing_and_timed_out_samples(db_env: RepoEnv, pg_base: Path,
                                                                  tmp_path: Path, views_dir: Path) -> None:
    repo = tmp_path / "dbrepo"
    (repo / "dblib").mkdir(parents=True)
    (repo / "dblib" / "__init__.py").write_text("")
    (repo / "dblib" / "store.py").write_text(DB_LIB)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_store.py").write_text(textwrap.dedent(DB_TESTS))
    out = tmp_path / "tasks.jsonl"
    report = build(BuildOptions(repo=str(repo), output=out, env=db_env.root, services=["postgres"], jobs=1))
    assert report.baseline_failures == []
    task = next(t for t in map(json.loads, out.read_text().splitlines()) if t["qualname"] == "save")
    assert task["services"] == ["postgres"]
    good = "def save(conn, key, value):\n" + textwrap.indent(textwrap.dedent(task["reference"]), "    ")
    samples = [Sample("fails", task, LEAVE_TABLE), Sample("crashes", task, CRASH), Sample("hangs", task, HANG),
               *[Sample(f"good{i}", task, good) for i in range(4)], Sample("blank", task, None)]
    with PostgresService(base=pg_base) as pg:
        run_dir, sock = pg.run_dir, pg.socket_dir
        assert run_dir is not None
        results = {r.sample_id: r for r in run_samples(samples, repo, db_env, views_dir, workers=2, timeout=8,
                                                         service=pg)}
        assert results["fails"].outcome == "failed"
        assert results["crashes"].outcome != "passed"
        assert results["hangs"].outcome == "timeout"
        assert results["blank"].outcome == "failed"
        for i in range(4):  # each later sample got a fresh database: no table left by the others
            assert results[f"good{i}"].outcome == "passed", results[f"good{i}"].detail
        assert sorted(pg.databases()) == BASE_DATABASES
        assert len(pg.stats.created) == len(samples) == len(pg.stats.dropped)
    _assert_gone(run_dir, sock)
    assert list(pg_base.iterdir()) == []


def test_the_service_user_is_created_on_first_use() -> None:
    """Issue 45: README's test command on a fresh machine, without ``.ci/postgres-deps.sh``: as
    root, the service's system user is created when it is first needed (a throwaway name here,
    removed afterwards; the real one is ``ianvs-postgres``)."""
    import pwd
    import secrets
    import shutil
    import subprocess

    from core.scenarios.repo.postgres import ensure_service_user

    if os.geteuid() != 0 or not (shutil.which("useradd") or Path("/usr/sbin/useradd").exists()):
        pytest.skip("needs root and useradd (as the service itself does)")
    name = f"ianvs-pgt-{secrets.token_hex(3)}"
    try:
        entry = ensure_service_user(name)
        assert entry.pw_name == name and entry.pw_uid != 0 and entry.pw_shell.endswith("nologin")
        assert ensure_service_user(name).pw_uid == entry.pw_uid  # found, not created twice
    finally:
        subprocess.run([shutil.which("userdel") or "/usr/sbin/userdel", name], check=False, capture_output=True)
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
