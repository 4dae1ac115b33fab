"""Dataset builders and record schemas for the smart-coding scenario."""
from core.datasets.codegen import CodegenTask, read_codegen_jsonl, write_codegen_jsonl
from core.datasets.humaneval import convert_humaneval, select_tasks

__all__ = ["CodegenTask", "convert_humaneval", "read_codegen_jsonl", "select_tasks", "write_codegen_jsonl"]
