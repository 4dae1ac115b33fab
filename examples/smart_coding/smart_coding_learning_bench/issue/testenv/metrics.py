"""Metrics of the issue scenario; the logic lives in core.scenarios.issue (and .judge)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios import get_kind
from core.testcasecontroller.metrics.edge_cost import edge_cost

for alias, metric in get_kind("issue").metrics().items():
    ClassFactory.register_cls(metric, ClassType.GENERAL, alias=alias)
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
