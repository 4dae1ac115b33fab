"""``ianvs edge``: run grading on edge nodes with Dask distributed.

* ``ianvs edge certs --out DIR --scheduler-host IP --workers edge1,edge2``: a cluster CA and
  certificates for the scheduler, each worker and the client (``cryptography``);
* ``ianvs edge scheduler --host IP [--port 8786] --certs DIR``: exec the real Dask scheduler,
  listening only on ``IP``, dashboard off, mutual TLS;
* ``ianvs edge worker --scheduler tls://IP:PORT --host IP --name edge1 --certs DIR
  [--node-option KEY=VALUE ...]``: exec the real Dask worker (with nanny) and the project's
  worker plugin; run it under a supervisor (Kubernetes, systemd): after a long partition a
  Dask worker exits and does not reconnect;
* ``ianvs edge demo``: a scheduler and two workers on 127.0.0.1, the codegen job's gold
  generators graded through them, everything stopped afterwards.

``scheduler`` and ``worker`` replace this process (``exec``) so signals reach Dask directly.
Plain ``tcp://`` (``--insecure``) is refused for any non-loopback address. A wildcard
``--host`` (``0.0.0.0``, ``::``, empty) is refused: Dask would listen on every interface and
advertise an address it guesses; the interface's own address must be given.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.common.log import setup_logging

logger = logging.getLogger("ianvs.edge")

ACTIONS = ("certs", "scheduler", "worker", "demo")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true", help="show tracebacks and DEBUG logs")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def edge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ianvs edge",
                                     description="Grade samples on edge nodes (Dask distributed).")
    sub = parser.add_subparsers(dest="action", required=True)
    certs = sub.add_parser("certs", help="write a cluster CA and certificates")
    certs.add_argument("--out", required=True, type=Path, help="folder to write into")
    certs.add_argument("--scheduler-host", required=True,
                       help="scheduler IP address(es), comma-separated")
    certs.add_argument("--workers", required=True,
                       help="worker names, comma-separated (name=IP adds the IP as a SAN)")
    for name, helptext in (("scheduler", "exec the Dask scheduler"),
                           ("worker", "exec a Dask worker with the node plugin")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--host", required=True,
                       help="IP address to listen on and advertise (no name: no DNS, no probe)")
        p.add_argument("--certs", type=Path, help="folder written by 'ianvs edge certs'")
        p.add_argument("--cert-name",
                       help="use CERTS/NAME.pem and CERTS/NAME.key (default: scheduler, or the "
                            "worker's --name)")
        p.add_argument("--insecure", action="store_true",
                       help="plain tcp:// without certificates (loopback addresses only)")
        if name == "scheduler":
            p.add_argument("--port", type=int, default=8786)
        else:
            p.add_argument("--scheduler", required=True, help="tls://IP:PORT of the scheduler")
            p.add_argument("--name", required=True,
                           help="node name (its certificate is CERTS/NAME.pem)")
            p.add_argument("--node-option", action="append", default=[],
                           help="KEY=VALUE option of the node's sandbox backend (overrides the "
                                "job's), e.g. workers=2 or min_isolation=kernel")
            p.add_argument("--worker-port", type=int, help="fixed port (default: random)")
            p.add_argument("--nanny-port", type=int, help="fixed port (default: random)")
            p.add_argument("--memory-limit", default="0",
                           help="Dask memory limit of the worker process (default 0: none; "
                                "samples are limited by the sandbox)")
    demo = sub.add_parser("demo", help="scheduler + two workers here, gold generators, stop")
    demo.add_argument("--workdir", type=Path,
                      help="keep certificates, logs and results here (default: a temp folder)")
    demo.add_argument("--no-progress", action="store_true")
    for p in (certs, demo, *[sub.choices[n] for n in ("scheduler", "worker")]):
        _common(p)
    return parser


def _tls(args: argparse.Namespace, party: str, host: str):  # type: ignore[no-untyped-def]
    from core.edge.processes import tls_files
    from core.edge.settings import is_loopback

    if args.insecure:
        if not is_loopback(host):
            raise ValueError(f"--insecure (plain tcp://) is only allowed on loopback, not {host}")
        logger.warning("plain tcp:// without certificates: anyone who reaches the port can run "
                       "code here (loopback only)")
        return None
    if args.certs is None:
        raise ValueError("--certs DIR is required (write it with 'ianvs edge certs'), or "
                         "--insecure on loopback")
    tls = tls_files(args.certs, party)
    for path in (tls.ca_file, tls.cert_file, tls.key_file):
        if not Path(path).is_file():
            raise ValueError(f"{path} not found (write it with 'ianvs edge certs')")
    return tls


def _exec(argv: list[str]) -> int:
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                  else []))
    logger.info("exec %s", " ".join(argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
    return 1  # not reached


def _listen_address(host: str, port: int) -> str:
    """``tcp://HOST:PORT`` for checking a ``--host`` (brackets for IPv6); wildcards refused."""
    from core.edge.settings import refuse_wildcard

    refuse_wildcard(host)
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def _run(args: argparse.Namespace) -> int:
    from core.edge.settings import parse_address

    if args.action == "certs":
        from core.edge.certs import write_certs

        hosts = [h.strip() for h in args.scheduler_host.split(",") if h.strip()]
        workers = [w.strip() for w in args.workers.split(",") if w.strip()]
        issued = write_certs(args.out, hosts, workers)
        for item in issued:
            print(f"{item.name}: {item.cert} {item.key}")
        print(f"CA: {args.out / 'ca.pem'} (keep {args.out / 'ca.key'} off the cluster)")
        return 0
    if args.action == "scheduler":
        from core.edge.processes import scheduler_command

        parse_address(_listen_address(args.host, args.port))
        return _exec(scheduler_command(args.host, args.port,
                                       _tls(args, args.cert_name or "scheduler", args.host)))
    if args.action == "worker":
        from core.edge.node import parse_node_options
        from core.edge.processes import worker_command

        parse_address(_listen_address(args.host, 1))
        scheme, shost, _ = parse_address(args.scheduler)
        parse_node_options(args.node_option)
        tls = _tls(args, args.cert_name or args.name, args.host)
        if (tls is None) != (scheme == "tcp"):
            raise ValueError(f"--scheduler {args.scheduler} does not match "
                             f"{'--insecure' if tls is None else '--certs'}")
        if tls is None and not __import__("ipaddress").ip_address(shost).is_loopback:
            raise ValueError("plain tcp:// is only allowed on loopback")
        logger.info("worker %s: run this under a supervisor (a Kubernetes DaemonSet, systemd): "
                    "after a long network partition a Dask worker exits and does not reconnect",
                    args.name)
        return _exec(worker_command(args.scheduler, args.host, args.name, tls, args.node_option,
                                    args.memory_limit, args.worker_port, args.nanny_port))
    from core.cmd.edge_demo import run_demo

    folder = args.workdir or Path(tempfile.mkdtemp(prefix="ianvs-edge-demo-"))
    rows = run_demo(folder, show_progress=not args.no_progress)
    for row in rows:
        print(f"{row['generator']}: pass@1={row.get('pass@1')} passed={row.get('passed')} "
              f"failed={row.get('failed')} infra_error={row.get('infra_error')} "
              f"executed_by={row.get('executed_by')}")
    print(f"demo files: {folder}")
    return 0


def edge_main(argv: Sequence[str]) -> int:
    """``ianvs edge ...``; returns the exit status (errors: one line, ``--debug`` traceback)."""
    args = edge_parser().parse_args(list(argv))
    setup_logging("DEBUG" if args.debug else args.log_level)
    try:
        return _run(args)
    except (ValueError, OSError, RuntimeError, TimeoutError) as exc:
        if args.debug:
            logger.exception("ianvs edge %s failed", args.action)
        from core.common.errors import IanvsError

        text = str(exc) if isinstance(exc, IanvsError) else f"{type(exc).__name__}: {exc}"
        print(f"ianvs edge: error: {text}", file=sys.stderr)
        return 1
