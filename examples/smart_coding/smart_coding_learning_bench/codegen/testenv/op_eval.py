"""Execution-based metrics: pass@k with outcome counts, and generation cost.

The samples run in the sandbox configured under ``sandbox:`` in testenv.yaml; the logic
lives in core.scenarios.codegen.metrics.
"""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.codegen.metrics import pass_at_k
from core.testcasecontroller.metrics.edge_cost import edge_cost

ClassFactory.register_cls(pass_at_k, ClassType.GENERAL, alias="pass_at_k")
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
