"""Metrics of the self-align scenario: ``selfalign`` (alignment, hidden pass@1, false
alignment, test validity, cost; core.scenarios.selfalign.metrics) and the codegen metrics on the
final code (``pass_at_k``: hidden tests, outcome counts, grading tier)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.selfalign.metrics import selfalign
from core.testcasecontroller.metrics.codegen import edge_cost, pass_at_k

ClassFactory.register_cls(selfalign, ClassType.GENERAL, alias="selfalign")
ClassFactory.register_cls(pass_at_k, ClassType.GENERAL, alias="pass_at_k")
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
