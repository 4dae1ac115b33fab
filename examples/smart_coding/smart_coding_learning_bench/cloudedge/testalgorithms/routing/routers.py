"""The routers for code, registered under their names as hard_example_mining modules (see
core.scenarios.cloudedge.routers for what each does and in which mining mode)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.cloudedge import learned, routers

__all__ = ["ROUTERS", "FITTED"]

ROUTERS = ("EdgeOnly", "CloudOnly", "RandomRouter", "OracleRouter", "ExampleTests", "Confidence",
           "SelfTests")
#: routers fitted on the testenv's train split (core.scenarios.cloudedge.learned)
FITTED = ("CalibratedConfidence", "LearnedRouter")
for _name in ROUTERS:
    ClassFactory.register_cls(getattr(routers, _name), ClassType.HEM, alias=_name)
for _name in FITTED:
    ClassFactory.register_cls(getattr(learned, _name), ClassType.HEM, alias=_name)
