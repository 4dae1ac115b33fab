"""Metrics of the comment scenario; the logic lives in core.scenarios.comment (and .judge)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios import get_kind
from core.testcasecontroller.metrics.edge_cost import edge_cost

for alias, metric in get_kind("comment").metrics().items():
    ClassFactory.register_cls(metric, ClassType.GENERAL, alias=alias)
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
