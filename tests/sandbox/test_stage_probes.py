"""``benchmarks/sandbox_stages.py`` measures the boundary tier stage by stage by inserting probes
at fixed anchors of the sandbox's code. This keeps those anchors in step with the code: when a
change moves one, this fails here (fast), not in the next performance investigation."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stages():
    spec = importlib.util.spec_from_file_location("_sandbox_stages", ROOT / "benchmarks/sandbox_stages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_probe_anchor_applies_once_and_the_probed_modules_still_compile(tmp_path: Path) -> None:
    stages = _stages()
    stages.make_tree(str(tmp_path))  # SystemExit naming the anchor when one is gone
    sandbox = tmp_path / stages.SANDBOX
    for name in sorted({name for name, _anchor, _new in stages.PROBES}):
        text = (sandbox / name).read_text(encoding="utf-8")
        compile(text, str(sandbox / name), "exec")
        assert text != (ROOT / stages.SANDBOX / name).read_text(encoding="utf-8")


def test_the_analysis_reads_hops_and_cpu_lines(tmp_path: Path) -> None:
    """Event lines before the ``TIMED`` mark (the warm round) are ignored; a request's hops are
    differences of its events' clocks; "max(a,b)" takes the later event."""
    stages = _stages()
    log = tmp_path / "stages.log"
    log.write_text("5 S0 1\n0 TIMED 0\n"
                   "1000 S0 2\n3000 S1 2\n9000 C2 2\n7000 J1 2\n10000 J2 2\n20000 L 2\n"
                   "0 CCPU 2 500000 1000000 900000\n0 JCPU 2 800000 60000 400000\n", encoding="ascii")
    result = stages.analyse(str(log))
    assert result["requests"] == 1
    assert result["hops_us"]["server prepares, sends to spawner"] == (2.0, 2.0)
    assert result["hops_us"]["'ready' hop"] == (1.0, 1.0)  # from max(C2, J1) = 9000
    assert result["hops_us"]["slot busy per request"] == (19.0, 19.0)
    assert result["candidate_cpu_us"] == {"fork -> first line": 500.0, "walls": 1000.0, "program load": 900.0}
    assert result["judge_cpu_us"]["check()"] == 400.0
