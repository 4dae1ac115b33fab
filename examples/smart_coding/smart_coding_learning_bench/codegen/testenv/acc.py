"""``acc``: the share of generated samples whose unit tests pass (executed in the sandbox)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.codegen.metrics import exec_accuracy

ClassFactory.register_cls(exec_accuracy, ClassType.GENERAL, alias="acc")
