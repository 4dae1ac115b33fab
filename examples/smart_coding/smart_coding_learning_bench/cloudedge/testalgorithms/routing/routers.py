"""The routers for code, registered under their names as hard_example_mining modules (see
core.scenarios.cloudedge.routers for what each does and in which mining mode)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.cloudedge import routers

__all__ = ["ROUTERS"]

ROUTERS = ("EdgeOnly", "CloudOnly", "RandomRouter", "OracleRouter", "ExampleTests", "Confidence",
           "SelfTests")
for _name in ROUTERS:
    ClassFactory.register_cls(getattr(routers, _name), ClassType.HEM, alias=_name)
