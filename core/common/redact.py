"""What may be written where others can read it: the one rule for secrets and for paths.

Secrets
    A *credential-like name* is a key whose parts (split at ``-``, ``_``, ``.`` and camelCase
    humps, case-insensitively) include ``key``, ``api_key``/``apikey``, ``token``, ``secret``,
    ``password``/``passwd``/``pwd``, ``passphrase``, ``authorization``, ``auth``,
    ``credential(s)``, ``bearer`` or ``private_key`` — e.g. ``api_key``, ``OPENAI_API_KEY``,
    ``authToken``, ``db-password``, ``basemodel-api_key`` (a rank column). Names ending in
    ``_env`` hold the *name* of an environment variable, not its value, and are kept
    (``api_key_env``). ``max_tokens`` or ``tokens_per_s`` are not credential-like (``tokens`` is
    not ``token``).

    The value of such a key is replaced by :data:`REDACTED` in ``case.json``, the rank files,
    the report, the manifest and the logs (:func:`redact`); the string values themselves are
    also registered (:func:`register_secrets`) so that an error message or traceback that
    quotes one is scrubbed (:func:`scrub`) before it is logged or stored, and the ``ianvs`` log
    handler scrubs every record (:class:`ScrubFilter`).

Paths
    Published artifacts (``rank/``, ``report/``) never hold the user's absolute directory
    layout: :func:`public_path` turns an absolute path into a path relative to the first
    *base* folder that contains it (the job file's folder, the workspace, the current
    directory), or into its file name when none does.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REDACTED = "<redacted>"

_SECRET_PART = re.compile(
    r"(^|[-_.])(api_?key|key|token|secret|password|passwd|pwd|passphrase|authori[sz]ation|"
    r"auth|credentials?|bearer|private_?key)($|[-_.])", re.I)
_HUMP = re.compile(r"([a-z0-9])([A-Z])")
#: registered secret values shorter than this are not scrubbed from free text (too many
#: false hits: a password "1" would blank every digit one)
MIN_SCRUB_LENGTH = 4

_lock = threading.Lock()
_known: set[str] = set()


def is_secret_name(name: str) -> bool:
    """True when ``name`` looks like it holds a credential (see the module docstring)."""
    if not name or name.lower().endswith("_env"):
        return False
    return bool(_SECRET_PART.search(_HUMP.sub(r"\1_\2", name)))


def redact(value: Any, key: str = "") -> Any:
    """``value`` with every credential-like entry replaced by :data:`REDACTED`, recursively.

    ``key`` is the name ``value`` is stored under (``""`` for none). Mappings become ``dict``
    with ``str`` keys, tuples become lists; nothing else changes. Never mutates its input.
    """
    if key and is_secret_name(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def secret_values(value: Any, key: str = "") -> list[str]:
    """The string forms of every value stored under a credential-like name in ``value``."""
    if key and is_secret_name(key):
        if isinstance(value, (Mapping, list, tuple)):
            return [s for item in (value.values() if isinstance(value, Mapping) else value)
                    for s in secret_values(item, key)]
        return [str(value)] if value not in (None, "") else []
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in secret_values(v, str(k))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in secret_values(v)]
    return []


def register_secrets(values: Iterable[str]) -> None:
    """Remember secret strings for :func:`scrub` for the rest of the process."""
    with _lock:
        _known.update(v for v in values if len(v) >= MIN_SCRUB_LENGTH)


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every registered secret (and every string of ``extra``) replaced by
    :data:`REDACTED`; longest first, so a secret containing another is removed whole."""
    with _lock:
        values = set(_known)
    values.update(v for v in extra if len(v) >= MIN_SCRUB_LENGTH)
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class ScrubFilter(logging.Filter):
    """Handler filter: the formatted message of every record goes through :func:`scrub`."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            active = bool(_known)
        if active:
            message = record.getMessage()
            clean = scrub(message)
            if clean != message:
                record.msg, record.args = clean, ()
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


def _bases(bases: Sequence[Path]) -> list[str]:
    out: list[str] = []
    for base in bases:
        for form in (os.path.abspath(base), os.path.realpath(base)):
            if form not in out and form != os.sep:
                out.append(form)
    return sorted(out, key=len, reverse=True)


def public_path(path: str | os.PathLike[str], bases: Sequence[Path]) -> str:
    """``path`` as it may appear in a published artifact.

    A relative path is returned as written. An absolute one (``~`` expanded) becomes relative
    to the first of ``bases`` containing it (tried longest first, as given and resolved), in
    POSIX form; otherwise only its file name is kept.
    """
    text = os.fspath(path)
    expanded = os.path.expanduser(text)
    if not os.path.isabs(expanded):
        return text
    candidates = {os.path.abspath(expanded), os.path.realpath(expanded)}
    for base in _bases(bases):
        for candidate in candidates:
            if candidate == base:
                return "."
            if candidate.startswith(base + os.sep):
                return Path(os.path.relpath(candidate, base)).as_posix()
    return Path(expanded).name


def public_paths(value: Any, bases: Sequence[Path]) -> Any:
    """``value`` (JSON-like) with every string made publishable: a string that is an absolute
    path goes through :func:`public_path`; inside other strings each base folder prefix is
    removed and the home folder becomes ``~``."""
    if isinstance(value, Mapping):
        return {k: public_paths(v, bases) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [public_paths(v, bases) for v in value]
    if not isinstance(value, str):
        return value
    if "\n" not in value and os.path.isabs(os.path.expanduser(value)):
        return public_path(value, bases)
    name, sep, rest = value.partition("=")
    if sep and "\n" not in rest and os.path.isabs(os.path.expanduser(rest)):
        return name + sep + public_path(rest, bases)  # --option=/abs/path
    for base in _bases(bases):
        value = value.replace(base + os.sep, "")
    home = str(Path.home())
    if home not in ("", os.sep):
        value = value.replace(home, "~")
    return value
