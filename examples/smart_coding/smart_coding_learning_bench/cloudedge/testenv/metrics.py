"""``cloudedge``: pass@1 of the final answers (sandbox), cloud share, tokens, latency split,
oracle and regret (see core.scenarios.cloudedge.metrics)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.cloudedge.metrics import cloudedge

ClassFactory.register_cls(cloudedge, ClassType.GENERAL, alias="cloudedge")
