"""Options of the ``dask`` backend and the address rules they must satisfy.

Contract: :func:`check_options` validates a ``sandbox:`` mapping for ``backend: dask`` without
connecting to anything (``ianvs validate`` uses it): the scheduler address, the TLS files
(resolved against the YAML's folder, must exist), ``node_backend``, ``nodes``, ``batch_size``,
``node_timeout``, ``min_isolation`` and ``node_options``. Rules:

* ``tls://HOST:PORT`` needs ``tls: {ca_file, cert_file, key_file}`` (mutual TLS);
* ``tcp://`` (no encryption, no authentication) is accepted only for a loopback address, with a
  warning; any other address must use ``tls://``;
* ``HOST`` must be an IP literal (a hostname would go to the system resolver), and not a
  wildcard (``0.0.0.0``, ``::``): see :func:`refuse_wildcard`.

Errors are :class:`OptionError` (a ``ValueError``) naming the option in ``key``.
"""
from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from core.testenvmanager.sandbox.types import IsolationLevel

__all__ = ["OptionError", "TlsFiles", "EdgeSettings", "check_options", "parse_address",
           "is_loopback", "is_wildcard", "refuse_wildcard", "security", "MISSING_EXTRA"]

LOGGER = logging.getLogger(__name__)

MISSING_EXTRA = ("the dask backend needs the 'edge' extra: pip install 'ianvs-smart-coding[edge]' "
                 "(dask, distributed, cryptography, kubernetes)")
DEFAULT_BATCH = 16
DEFAULT_NODE_TIMEOUT = 60.0


class OptionError(ValueError):
    """A bad ``dask`` backend option; ``key`` names it (dotted for ``tls.*``)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one party: the cluster CA, its certificate and its private key."""

    ca_file: str
    cert_file: str
    key_file: str


@dataclass(frozen=True)
class EdgeSettings:
    """Checked options of the ``dask`` backend (see the module docstring)."""

    scheduler: str
    tls: TlsFiles | None
    node_backend: str = "local"
    nodes: tuple[str, ...] = ()
    batch_size: int = DEFAULT_BATCH
    node_timeout: float = DEFAULT_NODE_TIMEOUT
    node_options: Mapping[str, Any] | None = None
    min_isolation: IsolationLevel = IsolationLevel.NONE


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is empty or an unspecified ("any") address: ``0.0.0.0``, ``::``,
    ``[::]``. Such an address listens on every interface and makes Dask advertise a guessed
    one."""
    text = host.strip().strip("[]")
    if not text:
        return True
    try:
        return ipaddress.ip_address(text).is_unspecified
    except ValueError:
        return False


def refuse_wildcard(host: str, flag: str = "--host") -> None:
    """``ValueError`` with a clear message when ``host`` is a wildcard (see :func:`is_wildcard`)."""
    if is_wildcard(host):
        raise ValueError(f"{flag} {host!r} is a wildcard address: Dask would listen on every "
                         "interface and advertise a guessed address; give the IP address of the "
                         "interface to listen on (e.g. 10.0.0.10)")


def parse_address(address: str) -> tuple[str, str, int]:
    """``"tls://10.0.0.1:8786"`` -> ``("tls", "10.0.0.1", 8786)``; ``ValueError`` otherwise.

    IPv6 literals go in brackets (``tls://[fd00::1]:8786``). The host must be an IP literal.
    """
    if not isinstance(address, str) or "://" not in address:
        raise ValueError(f"expected 'tls://IP:PORT', got {address!r}")
    scheme, rest = address.split("://", 1)
    if scheme not in ("tls", "tcp"):
        raise ValueError(f"protocol must be tls:// (or tcp:// on loopback), got {scheme}://")
    if rest.startswith("["):
        host, _, port_text = rest[1:].partition("]:")
    else:
        host, _, port_text = rest.rpartition(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"the host of {address!r} must be an IP address, not a name "
                         "(names go to the system DNS)") from None
    if is_wildcard(host):
        raise ValueError(f"{address!r} is a wildcard address, not one to connect to; give the "
                         "scheduler's IP address")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{address!r} needs a port between 1 and 65535")
    return scheme, host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP literal) is a loopback address."""
    return ipaddress.ip_address(host).is_loopback


def _resolve(raw: Any, base_dir: Path | None, key: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise OptionError(key, f"must be the path of a PEM file, got {raw!r}")
    path = Path(raw).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path] + (
        [base_dir / path] if base_dir is not None else [])
    for cand in candidates:
        if cand.is_file():
            return str(cand.resolve())
    raise OptionError(key, f"names {raw!r}, which was not found (tried "
                           f"{', '.join(str(c) for c in candidates)})")


def _positive(value: Any, key: str, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int) \
            or value <= 0:
        raise OptionError(key, f"must be a positive {'number' if kind is float else 'whole number'}, "
                               f"got {value!r}")
    return kind(value)


def check_options(options: Mapping[str, Any], base_dir: Path | None = None) -> EdgeSettings:
    """Check the ``dask`` options; returns them typed with absolute TLS paths (no connection)."""
    if "scheduler" not in options:
        raise OptionError("scheduler", "is required for backend dask (e.g. 'tls://10.0.0.1:8786')")
    address = options["scheduler"]
    try:
        scheme, host, _port = parse_address(address)
    except ValueError as exc:
        raise OptionError("scheduler", str(exc)) from None
    tls_raw = options.get("tls")
    tls: TlsFiles | None = None
    if tls_raw is not None:
        if not isinstance(tls_raw, Mapping):
            raise OptionError("tls", "must be a mapping {ca_file, cert_file, key_file}")
        unknown = sorted(set(tls_raw) - {"ca_file", "cert_file", "key_file"})
        if unknown:
            raise OptionError(f"tls.{unknown[0]}", "is not a tls option (ca_file, cert_file, "
                                                   "key_file)")
        tls = TlsFiles(*(_resolve(tls_raw.get(k), base_dir, f"tls.{k}")
                         for k in ("ca_file", "cert_file", "key_file")))
    if scheme == "tls" and tls is None:
        raise OptionError("tls", "is required with a tls:// scheduler: {ca_file, cert_file, "
                                 "key_file} (write them with 'ianvs edge certs')")
    if scheme == "tcp" and not is_loopback(host):
        raise OptionError("scheduler", f"plain tcp:// is only accepted on loopback; use tls:// "
                                       f"with certificates for {host}")
    if scheme == "tcp" and tls is not None:
        raise OptionError("tls", "is set but the scheduler address is tcp://; use tls://")
    node_backend = options.get("node_backend", "local")
    if node_backend == "dask" or not isinstance(node_backend, str):
        raise OptionError("node_backend", f"must be the backend each node grades with (e.g. "
                                          f"'local'), got {node_backend!r}")
    from core.testenvmanager.sandbox.base import known_backends

    if node_backend not in known_backends():
        raise OptionError("node_backend", f"unknown backend {node_backend!r}; known: "
                                          f"{', '.join(b for b in known_backends() if b != 'dask')}")
    nodes = options.get("nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise OptionError("nodes", f"must be a list of worker names, got {nodes!r}")
    node_options = options.get("node_options") or {}
    if not isinstance(node_options, Mapping):
        raise OptionError("node_options", "must be a mapping of options of the node backend")
    if node_options:
        from core.testenvmanager.sandbox.base import check_backend_options

        try:
            check_backend_options(node_backend, dict(node_options))
        except (TypeError, ValueError) as exc:
            raise OptionError("node_options", str(exc)) from None
    try:
        min_isolation = IsolationLevel.parse(options.get("min_isolation", IsolationLevel.NONE))
    except (ValueError, TypeError) as exc:
        raise OptionError("min_isolation", str(exc)) from None
    return EdgeSettings(
        scheduler=address, tls=tls, node_backend=node_backend, nodes=tuple(nodes),
        min_isolation=min_isolation,
        batch_size=_positive(options.get("batch_size", DEFAULT_BATCH), "batch_size", int),
        node_timeout=_positive(options.get("node_timeout", DEFAULT_NODE_TIMEOUT),
                               "node_timeout", float),
        node_options=dict(node_options))


def security(tls: TlsFiles | None, role: str = "client") -> Any:
    """``distributed.Security`` for ``role`` (client, scheduler or worker): mutual TLS with
    encryption required, or ``None`` for a loopback ``tcp://`` cluster."""
    if tls is None:
        return None
    try:
        from distributed.security import Security
    except ImportError:
        raise RuntimeError(MISSING_EXTRA) from None
    kwargs = {f"tls_{role}_cert": tls.cert_file, f"tls_{role}_key": tls.key_file}
    return Security(tls_ca_file=tls.ca_file, require_encryption=True, **kwargs)
