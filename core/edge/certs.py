"""A cluster CA and the certificates of its parties (``ianvs edge certs``), with ``cryptography``.

:func:`write_certs` writes into ``out``:

* ``ca.pem`` (give it to every party) and ``ca.key`` (keep it off the cluster; only needed to
  issue more certificates);
* ``scheduler.pem``/``scheduler.key`` with the scheduler's IP addresses as subject alternative
  names;
* ``<worker>.pem``/``<worker>.key`` for each worker name (the name is the DNS SAN, worker IPs
  can be added as ``name=IP``);
* ``client.pem``/``client.key`` for the machine that runs ``ianvs``.

Every leaf certificate is valid for server and client authentication (Dask processes both
listen and connect). Keys are ECDSA P-256, written with mode 0600. Dask checks the chain, not
host names, and certificates carry no roles: any of them can act as a client (see
``docs/edge.md``, NetworkPolicy). Existing files are overwritten.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["write_certs", "Issued", "worker_spec"]

_VALID_DAYS = 365


@dataclass(frozen=True)
class Issued:
    """Paths of one party's certificate and key."""

    name: str
    cert: Path
    key: Path


def worker_spec(item: str) -> tuple[str, list[str]]:
    """``"edge1"`` -> ``("edge1", [])``; ``"edge1=10.0.1.2"`` -> ``("edge1", ["10.0.1.2"])``."""
    name, _, ips = item.partition("=")
    name = name.strip()
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"worker name {name!r} must be letters, digits, '-', '_' or '.'")
    return name, [ip for ip in ips.split("+") if ip]


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600 if private else 0o644)


def write_certs(out: Path, scheduler_hosts: Sequence[str], workers: Sequence[str],
                client: bool = True) -> list[Issued]:
    """Write a new CA and the certificates (see module doc); returns what was issued.

    ``scheduler_hosts`` are IP literals (``ValueError`` otherwise); ``workers`` are names,
    optionally ``name=IP`` (several IPs joined by ``+``).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ips = [ipaddress.ip_address(h) for h in scheduler_hosts]
    specs = [worker_spec(w) for w in workers]
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=_VALID_DAYS)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ianvs edge cluster CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    _write(out / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / "ca.key", pem_key(ca_key), private=True)

    def issue(name: str, dns: list[str], addrs: list[ipaddress.IPv4Address | ipaddress.IPv6Address]
              ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(a) for a in addrs]
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(ca_name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        issued = Issued(name, out / f"{name}.pem", out / f"{name}.key")
        _write(issued.cert, cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(issued.key, pem_key(key), private=True)
        return issued

    done = [issue("scheduler", ["scheduler"], ips)]
    for name, wips in specs:
        if name in ("scheduler", "client", "ca"):
            raise ValueError(f"worker name {name!r} is reserved")
        done.append(issue(name, [name], [ipaddress.ip_address(i) for i in wips]))
    if client:
        done.append(issue("client", ["client"], []))
    return done
