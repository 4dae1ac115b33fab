"""Cloud-edge collaborative code generation (the ``jointinference`` paradigm on code tasks).

* :mod:`.models`: ``CodeModel``, any generator as an ``edgemodel`` or ``cloudmodel``, answers
  cached job-wide by content;
* :mod:`.routers`: ``EdgeOnly``, ``CloudOnly``, ``RandomRouter``, ``OracleRouter``,
  ``ExampleTests`` (the prompt's examples, run in the sandbox) and ``Confidence`` (token
  log-probabilities);
* :mod:`.metrics`: ``cloudedge``, pass@1 against cloud share, tokens, latency split, regret;
* :mod:`.examples`: the examples a prompt states, as a sandbox test.

The example job is ``examples/smart_coding/smart_coding_learning_bench/cloudedge``; the scenario
is documented in ``docs/proposals/scenarios/smart_coding/cloud-edge.md``.
"""
