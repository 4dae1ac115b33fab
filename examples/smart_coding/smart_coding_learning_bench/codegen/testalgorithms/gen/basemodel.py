"""Code-generation basemodel: the generator named by the ``generator`` hyperparameter.

The logic lives in core.generation.codegen_model; see that module for the hyperparameters
(generator, mode, decoding settings, generator options).
"""
from sedna.common.class_factory import ClassFactory, ClassType

from core.generation.codegen_model import CodegenModel

__all__ = ["BaseModel"]


@ClassFactory.register(ClassType.GENERAL, alias="gen")
class BaseModel(CodegenModel):
    """Registered as ``gen``; constructed once per test case with its hyperparameters."""
