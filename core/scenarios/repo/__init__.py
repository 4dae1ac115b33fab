"""The ``repo`` task kind: tasks reverse-engineered from a real repository and graded by its own tests.

Modules (each small, each with one job):

* :mod:`.source`     -- materialise a repository (git dir/bundle, sdist, folder); identity and content hash.
* :mod:`.project`    -- what the repository declares: PEP 517 build, import roots, test dependencies, pins.
* :mod:`.env`        -- a cached virtual environment per repository, pinned versions recorded.
* :mod:`.image_env`  -- the same as a docker image (``docker`` backend), or a task's ``run_env`` image.
* :mod:`.functions`  -- AST facts: candidate functions, blanking and injection by AST position, context.
* :mod:`.testrun`    -- run a repository's tests directly (pytest + a result plugin) with timeouts.
* :mod:`.coverage_map` -- per-test coverage contexts -> which tests cover which function.
* :mod:`.plugins`    -- which installed pytest plugins the selected tests need; the others off in every run.
* :mod:`.builder`    -- ``ianvs dataset repo``: baseline, coverage, blank-and-verify, task records.
* :mod:`.workdir`    -- a build's own folder, swept after a killed build (with what still runs in it).
* :mod:`.authoring`  -- ``--llm-problems``/``--llm-tests``: model-written problems and tests,
  validated in the sandbox (prompts in :mod:`.authoring_prompts`, static checks in :mod:`.written_tests`).
* :mod:`.view`       -- copy-on-write (hard-link farm) view of the repository per sample.
* :mod:`.execute`    -- run samples' injected code against the task's tests in the sandbox.
* :mod:`.postgres`   -- a private PostgreSQL server per run (unix socket only), a database per sample.
* :mod:`.metrics`    -- pass@k, FAIL_TO_PASS / PASS_TO_PASS shares, outcome counts.
* :mod:`.kind`       -- the ``repo`` task kind (record schema, answers) for ``ianvs -f``.
* :mod:`.prompts`    -- completion and chat prompts, the reference function.
* :mod:`.scoring`    -- the ``repo_tests`` metric: sources, environments, resumable execution.
"""
