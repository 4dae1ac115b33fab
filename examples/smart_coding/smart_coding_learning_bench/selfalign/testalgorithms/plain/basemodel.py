"""Plain code generation (the codegen scenario's basemodel): one completion per task, no tests,
no loop. Its pass@1 on the same tasks in the same run is what the self-align loop is compared
with. The logic lives in core.generation.codegen_model."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.generation.codegen_model import CodegenModel

__all__ = ["PlainModel"]


@ClassFactory.register(ClassType.GENERAL, alias="plain")
class PlainModel(CodegenModel):
    """Registered as ``plain``; constructed once per test case with its hyperparameters."""
