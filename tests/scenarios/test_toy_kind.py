"""A fourth task kind added the way docs/adding-a-scenario.md says: a kind module (schema,
prompts, reference, metrics), an example folder copied from the issue example with its kind
name changed, ``task_kind: {name, url}`` in testenv.yaml. Run with its gold controls."""
from __future__ import annotations

import csv
import shutil
import textwrap
from pathlib import Path

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

KIND_MODULE = '''
"""The ``title`` kind: write the question a FAQ answer answers (a toy)."""
from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import TASK_KIND, TaskKind, reject_unknown, require_str

PROMPT = "Write the question that this text answers, in one line:\\n\\n{text}"


def title_match(y_true, y_pred, context=None):
    """Share of samples whose answer equals the reference title (case-insensitive)."""
    from core.scenarios import get_kind
    from core.scenarios.scoring import iter_samples, mean

    kind, errors = get_kind("title"), []
    hits = [float(s.answer.lower() == s.record["title"].lower())
            for s in iter_samples(kind, y_pred, context, errors)]
    return {"title_match": mean(hits), "generation_error": len(errors)}


@ClassFactory.register(TASK_KIND, alias="title")
class TitleKind(TaskKind):
    name = "title"
    input_field = "text"

    def validate(self, record, source=None, line=None):
        if not isinstance(record, dict):
            raise DatasetError("record is not a JSON object", source=source, line=line)
        reject_unknown(record, {"id", "text", "title"}, source, line)
        return {"id": require_str(record, "id", source, line, allow_empty=False),
                "text": require_str(record, "text", source, line, allow_empty=False),
                "title": require_str(record, "title", source, line, allow_empty=False)}

    def messages(self, record):
        return [{"role": "user", "content": PROMPT.format(text=record["text"])}]

    def reference(self, record):
        return record["title"]

    def judge_view(self, record):
        return {"task": PROMPT.format(text=record["text"]), "reference": record["title"]}

    def metrics(self):
        return {"title_match": title_match}
'''


def test_a_toy_kind_added_as_documented(tmp_path: Path) -> None:
    root = tmp_path / "title"
    shutil.copytree(BENCH / "issue", root, ignore=shutil.ignore_patterns("workspace", "data"))
    (root / "data").mkdir()
    # step 1: the kind module
    (root / "title_kind.py").write_text(textwrap.dedent(KIND_MODULE))
    # step 2: data in the kind's schema (real FAQ texts)
    faq = read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3]
    write_jsonl(root / "data" / "titles.jsonl",
                [{"id": r["id"], "text": r["answer_1"]["body"], "title": r["question"]}
                 for r in faq])
    # step 3: the example's files name the kind
    env = root / "testenv" / "testenv.yaml"
    env.write_text(textwrap.dedent('''\
        testenv:
          task_kind: {name: "title", url: "../title_kind.py"}
          dataset:
            test_index: "../data/titles.jsonl"
            x_field: "text"
            y_field: "id"
          metrics:
            - name: "title_match"
              url: "./metrics.py"
        '''))
    metrics = root / "testenv" / "metrics.py"
    metrics.write_text(metrics.read_text().replace('"issue"', '"title"'))
    model = root / "testalgorithms" / "gen" / "basemodel.py"
    model.write_text(model.read_text().replace('kind = "issue"', 'kind = "title"'))
    alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    alg.write_text(alg.read_text().replace('["embedded", "reference", "broken"]',
                                           '["reference", "broken"]'))
    job = root / "benchmarkingjob.yaml"
    text = job.read_text().replace("smart_coding_issue", "smart_coding_title")
    start = text.index("    sort_by:")
    end = text.index("    visualization:")
    text = text[:start] + '    sort_by: [{"title_match": "descend"}]\n' + text[end:]
    start = text.index("      metrics: [")
    end = text.index("    save_mode:")
    job.write_text(text[:start] + '      metrics: ["title_match"]\n' + text[end:])

    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = list(csv.DictReader(open(next(tmp_path.glob("workspace/*/rank/all_rank.csv")))))
    by_gen = {r["basemodel-generator"]: r for r in rows}
    assert by_gen["reference"]["title_match"] == "1.0"
    assert by_gen["broken"]["title_match"] == "0.0"

    # and its schema guards the data like the built-in kinds
    write_jsonl(root / "data" / "titles.jsonl", [{"id": "x", "text": "t"}])
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 1 and "titles.jsonl:1: field 'title' must be a string" in res.stderr
