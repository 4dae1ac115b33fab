"""Execution-based metrics: pass@k with outcome counts, and generation cost.

The samples run in the sandbox configured under ``sandbox:`` in testenv.yaml; the logic
lives in core.testcasecontroller.metrics.codegen.
"""
from sedna.common.class_factory import ClassFactory, ClassType

from core.testcasecontroller.metrics.codegen import edge_cost, pass_at_k

ClassFactory.register_cls(pass_at_k, ClassType.GENERAL, alias="pass_at_k")
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
