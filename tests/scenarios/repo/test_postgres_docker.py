"""PostgreSQL tasks on the ``docker`` sandbox backend, for real: the run's PostgreSQL service
(:mod:`core.scenarios.repo.postgres`, a host process with no TCP) is reached from the containers
through its socket directory, bind-mounted read-only at ``/opt/ianvs/services/postgres``
(``DockerExecutor(socket_mounts=...)``); the containers keep ``--network none``.

Checked here: shipped ``dataset-postgres`` tasks pass with their reference and fail their
FAIL_TO_PASS tests blanked, each sample on a fresh database (a subset; the whole set is a
once-per-content gold control in test_gold_controls.py); a sample in a container reaches its own
database and nothing else (not another sample's database, not the superuser, not the host's
loopback services or its other sockets, not the internet, not a write into the socket
directory), and without the mount it cannot open a unix socket at all; a harness killed
(SIGKILL, SIGTERM) while a sample holds a session leaves no container, server or run directory.

Skipped (naming .ci/postgres-deps.sh) where PostgreSQL is not installed; the engine comes from
``require_docker()``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from core.scenarios.repo.execute import POSTGRES_IN_CONTAINER, Sample, SampleResult, run_samples
from core.scenarios.repo.image_env import ImageEnv, ensure_image_env
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable, find_binaries
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.scoring import source_root
from core.testenvmanager.sandbox import ExecRequest, get_executor
from core.testenvmanager.sandbox.images import DEFAULT_DOCKER_HOST, OWNER_LABEL, PACKAGES_DIR, connect
from core.testenvmanager.sandbox.types import ExecMode
from tests.sandbox.docker_env import require_docker
from tests.scenarios.repo.conftest import SHIPPED
from tests.scenarios.repo.test_postgres import BASE_DATABASES, DB_REQUIREMENTS, _postgres_pids

POSTGRES_SET = SHIPPED / "data" / "dataset-postgres-tasks.jsonl"
DATASET_SOURCE = SHIPPED / "data" / "dataset-2.0.0.tar.gz"
ROOT = Path(__file__).resolve().parents[3]

try:
    find_binaries()
except PostgresUnavailable as _exc:
    pytest.skip(_exc.render(), allow_module_level=True)


@pytest.fixture(scope="module")
def pg_image() -> ImageEnv:
    """The repository image of the shipped dataset sets (psycopg 3, SQLAlchemy; built once)."""
    require_docker()
    return ensure_image_env(DB_REQUIREMENTS)


@pytest.fixture(scope="module")
def dataset_root() -> Path:
    tasks = load_tasks(POSTGRES_SET, 1)
    return source_root(DATASET_SOURCE.resolve(), tasks[0]["repo"]["content_hash"])


def _size(task: dict) -> int:
    return len(task["tests"]["fail_to_pass"]) + len(task["tests"]["pass_to_pass"])


def subset(most_tests: int = 5) -> list[dict]:
    """Per file of the set, the task with the fewest tests (ties: the first), sorted by file;
    files whose smallest task has more than ``most_tests`` tests are left out (``connect`` and
    ``Types.__init__`` run all 40 tests of the database: about 30 s per sample on a busy
    machine; the whole-set gold control covers them). The shipped set gives 4 tasks: chunked,
    database, table and util."""
    best: dict[str, dict] = {}
    for task in load_tasks(POSTGRES_SET):
        have = best.get(task["file"])
        if have is None or _size(task) < _size(have):
            best[task["file"]] = task
    return [best[f] for f in sorted(best) if _size(best[f]) <= most_tests]


@pytest.mark.slow
def test_shipped_postgres_tasks_pass_and_fail_on_docker(pg_image: ImageEnv, dataset_root: Path, pg_base: Path,
                                                        views_dir: Path) -> None:
    """The gold control on a subset: reference passes every test, the blanked body none of its
    FAIL_TO_PASS tests; every sample had a database of its own, all dropped afterwards."""
    tasks = subset()
    assert len(tasks) == 4 and all(t["services"] == ["postgres"] for t in tasks)
    samples = ([Sample(t["task_id"] + "#ref", t, reference_code(t)) for t in tasks]
               + [Sample(t["task_id"] + "#blank", t, None) for t in tasks])
    with PostgresService(base=pg_base) as pg:
        results: dict[str, SampleResult] = {
            r.sample_id: r for r in run_samples(samples, dataset_root, pg_image, views_dir, timeout=120, service=pg)}
        assert sorted(pg.databases()) == BASE_DATABASES
        assert len(pg.stats.created) == len(samples) == len(pg.stats.dropped)
    for t in tasks:
        ref, blank = results[t["task_id"] + "#ref"], results[t["task_id"] + "#blank"]
        assert ref.outcome == "passed", (t["task_id"], ref.detail[-1500:])
        assert set(ref.tests) >= {*t["tests"]["fail_to_pass"], *t["tests"]["pass_to_pass"]}
        assert blank.outcome == "failed", (t["task_id"], blank.outcome, blank.detail[-500:])
        assert all(blank.tests.get(n) != "passed" for n in t["tests"]["fail_to_pass"]), t["task_id"]
    assert {(r.executed_by, r.isolation) for r in results.values()} == {("docker", "full")}


# --------------------------------------------------------------------------- walls

_PROBE = """
import errno, json, os, socket, sys
sys.path.insert(0, {site!r})
import psycopg
other, host_tcp, host_unix, superuser = {other!r}, {host_tcp!r}, {host_unix!r}, {superuser!r}
out = {{}}
try:
    socket.socket(socket.AF_UNIX).close()
except PermissionError:
    print("unix sockets refused", flush=True)
    raise
env = dict(os.environ)
out["pghost"] = env.get("PGHOST")
out["superuser_password_seen"] = any(superuser in v for v in env.values())
with psycopg.connect(env["DATABASE_URL"], autocommit=True) as c:
    c.execute("CREATE TABLE IF NOT EXISTS mine (x int)")
    out["own"] = c.execute("SELECT current_database()").fetchone()[0]
def attempt(user, password, dbname):
    try:
        psycopg.connect(host=env["PGHOST"], user=user, password=password, dbname=dbname).close()
        return "connected"
    except psycopg.Error as exc:
        return " ".join(str(exc).split())[-300:]
out["other_db_own_creds"] = attempt(env["PGUSER"], env["PGPASSWORD"], other)
out["superuser_guess"] = attempt("ianvs", env["PGPASSWORD"], "postgres")
def tcp(addr):
    try:
        s = socket.create_connection(addr, timeout=5)
        s.close()
        return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
out["host_loopback_tcp"] = tcp(("127.0.0.1", host_tcp))
out["internet_tcp"] = tcp(("1.1.1.1", 80))
def unix(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
    finally:
        s.close()
out["host_unix"] = unix(host_unix)
out["docker_engine"] = unix({engine!r})
for name, act in (("plant", lambda: open(env["PGHOST"] + "/.s.PGSQL.5433", "w").close()),
                  ("unlink", lambda: os.unlink(env["PGHOST"] + "/.s.PGSQL.5432"))):
    try:
        act()
        out[name] = "done"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, type(exc).__name__)
print(json.dumps(out))
"""


@pytest.mark.slow  # three containers, a server: over 5 s
def test_a_sample_in_a_container_reaches_its_database_and_nothing_else(pg_image: ImageEnv, pg_base: Path) -> None:
    """Two requests per check: the default one (``AF_INET`` refused by seccomp) and one with
    ``network: loopback`` (``AF_INET`` allowed, in a fresh container), where only the container's
    own network namespace stands between the sample and the host: the host's loopback listener
    is refused (another loopback), the internet unreachable. The docker engine's socket and a
    world-writable socket of the host are not in the container; the socket directory is
    read-only. Without ``socket_mounts`` the same sample cannot open a unix socket."""
    host_dir = Path(tempfile.mkdtemp(prefix="hostsock-", dir="/tmp"))
    host_dir.chmod(0o755)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(host_dir / "s"))
    os.chmod(host_dir / "s", 0o777)
    listener.listen()
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable from the host itself
    engine = DEFAULT_DOCKER_HOST.removeprefix("unix://")
    try:
        with PostgresService(base=pg_base) as pg, pg.database("a") as a, pg.database("b") as b:
            seen = replace(a, socket_dir=Path(POSTGRES_IN_CONTAINER)).env  # what run_samples gives on docker
            assert seen["PGHOST"] == POSTGRES_IN_CONTAINER and f"host={POSTGRES_IN_CONTAINER}" in seen["DATABASE_URL"]
            program = (f"import os as _o\n_o.environ.update({seen!r})\n"
                       + _PROBE.format(site=PACKAGES_DIR, other=b.name, host_tcp=port, host_unix=str(host_dir / "s"),
                                       superuser=pg._password, engine=engine))
            reqs = [ExecRequest(id=net, mode=ExecMode.SCRIPT, program=program, test="", timeout=60, memory_mb=1024,
                                network=net) for net in ("none", "loopback")]
            with get_executor("docker", workers=1, image=pg_image.image, min_isolation="kernel", audit_hook=False,
                              socket_mounts={str(pg.socket_dir): POSTGRES_IN_CONTAINER}) as ex:
                assert ex.socket_mounts == {str(pg.socket_dir): POSTGRES_IN_CONTAINER}
                results = {r.id: r for r in ex.run(reqs)}
            for net, res in results.items():
                assert res.outcome.value == "passed", (net, res.detail, res.stdout[-1000:], res.stderr[-2000:])
                got = json.loads(res.stdout.strip().splitlines()[-1])
                assert got["own"] == a.name and got["pghost"] == POSTGRES_IN_CONTAINER, got
                assert got["superuser_password_seen"] is False
                assert "no pg_hba.conf entry" in got["other_db_own_creds"], got
                assert "password authentication failed" in got["superuser_guess"], got
                # seccomp refuses AF_INET (EACCES) unless the request asks for loopback; then the
                # container's own namespace: another loopback, no route out
                want_tcp = ("EACCES", "EACCES") if net == "none" else ("ECONNREFUSED", "ENETUNREACH")
                assert (got["host_loopback_tcp"], got["internet_tcp"]) == want_tcp, (net, got)
                assert got["host_unix"] == got["docker_engine"] == "ENOENT", (net, got)
                assert got["plant"] in ("EROFS", "EACCES") and got["unlink"] in ("EROFS", "EACCES"), (net, got)
            assert pg.query("SELECT count(*) FROM pg_tables WHERE tablename = 'mine';", database=a.name).strip() == "1"
            assert (pg.socket_dir / ".s.PGSQL.5432").is_socket()

            with get_executor("docker", workers=1, image=pg_image.image, audit_hook=False) as ex:
                (plain,) = list(ex.run([reqs[0]]))
            assert plain.outcome.value != "passed"
            assert plain.stdout.strip() == "unix sockets refused", (plain.stdout, plain.detail)
    finally:
        listener.close()
        tcp.close()
        subprocess.run(["rm", "-rf", str(host_dir)], check=False)


def test_socket_mounts_are_checked_before_anything_starts(tmp_path: Path) -> None:
    for inside in ("/tmp/pg", "relative", "/run/pg", "/opt/ianvs/harness/pg"):
        with pytest.raises(ValueError, match="socket_mounts"):
            get_executor("docker", socket_mounts={str(tmp_path): inside})
    with pytest.raises(ValueError, match="socket_mounts.*not a directory"):
        get_executor("docker", socket_mounts={str(tmp_path / "missing"): "/opt/ianvs/pg"})
    (tmp_path / "views").mkdir()
    for inside in ("/srv/views", "/srv/views/pg", "/srv"):  # at, beneath, above the views
        with pytest.raises(ValueError, match="socket_mounts.*overlaps a read_mounts"):
            get_executor("docker", read_mounts={str(tmp_path / "views"): "/srv/views"},
                         socket_mounts={str(tmp_path): inside})


# --------------------------------------------------------------------------- killed runs

#: a harness running one dataset task on docker whose injected body holds a database session
#: open: prints its run directory, then waits in ``run_samples``
_HARNESS = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.image_env import ensure_image_env
from core.scenarios.repo.postgres import PostgresService
base, views, root = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
task = json.loads(sys.argv[4])
env = ensure_image_env(task["env"]["requirements"])  # built already: found by its hash
hold = (f"def {task['name']}(*args, **kwargs):\\n"  # the repository's own package: what the policy lets a body import
        "    import os, time, dataset\\n"
        "    db = dataset.connect(os.environ['DATABASE_URL'])\\n"
        "    list(db.query('SELECT 1'))\\n"
        "    time.sleep(600)\\n")
with PostgresService(base=base) as pg:
    print(pg.run_dir, flush=True)
    for r in run_samples([Sample("hold", task, hold)], root, env, views, timeout=600, service=pg, workers=1):
        print(r.outcome, flush=True)
"""


def _title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").strip()
    except OSError:
        return ""


def _server_tree(run_dir: Path) -> dict[int, str]:
    """The server's processes, ``{pid: title}``: the postmaster (its command line names
    ``run_dir``) and its children (backends retitle themselves: ``postgres: s1_... [local]``)."""
    roots = set(_postgres_pids(run_dir))
    tree = {pid: _title(pid) for pid in roots}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid in roots:
                tree[int(entry)] = _title(int(entry))
    return tree


def _alive(tree: dict[int, str]) -> dict[int, str]:
    """Those of ``tree`` still running (same pid and title: a reused pid does not count)."""
    return {pid: title for pid, title in tree.items() if title and _title(pid) == title}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL])
def test_a_killed_run_leaves_no_container_server_or_folder(pg_image: ImageEnv, dataset_root: Path, pg_base: Path,
                                                           views_dir: Path, sig: int) -> None:
    """Killed while its sample (in a container) holds a session: after SIGKILL the server quits
    by its death signal, the container by its fork server's end of file, and the next service
    start sweeps the run directory. (SIGTERM unwinds instead: databases dropped, containers
    removed, server stopped, run directory gone before the harness exits; it passed here too
    -- ``sig`` takes ``signal.SIGTERM`` -- but is left out of the suite to save its 20 s: the
    service's SIGTERM handling is test_postgres.py's, the executor's close on an unwinding run
    tests/sandbox/test_docker.py's.)"""
    task = next(t for t in subset() if t["class_name"] is None)
    client = connect(DEFAULT_DOCKER_HOST)
    proc = subprocess.Popen([sys.executable, "-c", _HARNESS, str(pg_base), str(views_dir), str(dataset_root),
                             json.dumps(task)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    owner = {"label": f"{OWNER_LABEL}={os.uname().nodename}:{proc.pid}"}
    try:
        assert proc.stdout is not None
        run_dir = Path(proc.stdout.readline().strip())
        assert run_dir.parent == pg_base, proc.stderr.read() if proc.stderr else ""
        deadline = time.monotonic() + 120
        tree = _server_tree(run_dir)
        while not any(t.startswith("postgres: s1_hold") for t in tree.values()):  # the sample is connected
            assert proc.poll() is None and time.monotonic() < deadline, "the sample never connected"
            time.sleep(0.2)
            tree = _server_tree(run_dir)
        assert client.containers.list(filters=owner, ignore_removed=True), "its container is not running"
        proc.send_signal(sig)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 20
        while _alive(tree) or client.containers.list(all=True, filters=owner, ignore_removed=True):
            assert time.monotonic() < deadline, (_alive(tree), client.containers.list(all=True, filters=owner, ignore_removed=True))
            time.sleep(0.2)
        if sig == signal.SIGKILL:
            assert run_dir.exists()  # nothing ran in the killed process to remove it ...
            with PostgresService(base=pg_base):
                assert not run_dir.exists()  # ... the next start sweeps it
        assert not run_dir.exists()
        assert list(pg_base.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in client.containers.list(all=True, filters=owner, ignore_removed=True):
            c.remove(force=True)
        client.close()
