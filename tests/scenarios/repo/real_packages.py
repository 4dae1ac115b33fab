"""Real PyPI packages of different shapes the repository builder is tried on (the test
``test_real_layouts.py`` and ``benchmarks/real_layouts.py``): each sdist is fetched like the
shipped sets' (``pip download NAME==VERSION --no-deps --no-binary :all:``) into
``~/.cache/ianvs-smart-coding/repo-sdists`` once, and checked against the sha256 recorded here (a
changed upload is an error). Every package is MIT-licensed (the licence file is in each sdist)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from core.scenarios.repo.env import default_cache_dir

#: (distribution, version, sha256 of the sdist, the shape it stands for)
PACKAGES = [
    ("humanize", "4.12.1", "1338ba97415c96556758a6e2f65977ed406dddf4620d4c6db9bbdfd07f0f1232",
     "src/ layout, hatchling + hatch-vcs, tests outside, extra 'tests' (freezegun)"),
    ("platformdirs", "4.3.6", "357fb2acbc885b0419afd3ce3ed34564c13c9b95c89360cd9563f73aa5e2b907",
     "src/ layout, hatchling + hatch-vcs, extra 'test', tests use pytest-mock's mocker fixture"),
    ("tabulate", "0.9.0", "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
     "flat layout, setuptools + setuptools-scm, tests in test/, tox.ini deps"),
    ("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
     "flat layout, flit, unittest-style tests outside, no test dependencies"),
    ("iso8601", "2.1.0", "6b1d3829ee8921c4301998c909f7829fa9ed3cbdac0d3b16af2d743aed1ba8df",
     "flat layout, poetry-core, tests inside the package, Poetry dev group (hypothesis, pytz)"),
]


#: Packages whose test environment holds pytest plugins the tests do not use (some of which the
#: sandbox refuses as they load): (distribution, version, sha256 of the sdist, the shape, extra
#: ``--requirement`` pins, the plugins (entry-point names) the build must disable). MIT-licensed.
PLUGIN_PACKAGES = [
    ("humanize", "4.12.1", "1338ba97415c96556758a6e2f65977ed406dddf4620d4c6db9bbdfd07f0f1232",
     "humanize with pytest-benchmark installed (its plugin starts 'git' subprocesses as it loads)",
     ["pytest-benchmark==5.3.1"], ["benchmark"]),
    ("inflect", "7.3.1", "edd785148a673b0c6dfef1a7d80cc1bcb2dd6d041cdb313b60032e464fd4e808",
     "flat layout, setuptools + setuptools-scm, extra 'test' with pytest-checkdocs, pytest-enabler (adds "
     "--mypy/--ruff/--checkdocs to every run), pytest-mypy, pytest-ruff",
     [], ["checkdocs", "enabler", "mypy", "ruff"]),
]


def sdist(name: str, version: str, sha256: str) -> Path:
    """The package's PyPI sdist, downloaded once into the cache and checked against ``sha256``."""
    cache = default_cache_dir().parent / "repo-sdists"
    cache.mkdir(parents=True, exist_ok=True)
    found = [p for p in cache.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}.")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps",
                        "--no-binary", ":all:", "-q", "-d", str(cache)], check=True, capture_output=True)
        found = [p for p in cache.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}.")]
    if len(found) != 1:
        raise RuntimeError(f"expected one sdist of {name} {version} in {cache}, found {found}")
    if hashlib.sha256(found[0].read_bytes()).hexdigest() != sha256:
        raise RuntimeError(f"{found[0]} is not the recorded sdist (sha256 differs)")
    return found[0]
