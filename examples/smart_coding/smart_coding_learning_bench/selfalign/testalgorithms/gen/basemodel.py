"""Self-align basemodel: the generator named by ``generator`` inside the self-align loop.

The logic lives in core.scenarios.selfalign.model; see that module for the hyperparameters
(generator, max_tries, generate, feedback, tests_per_task, ...).
"""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.selfalign.model import SelfAlignModel

__all__ = ["BaseModel"]


@ClassFactory.register(ClassType.GENERAL, alias="gen")
class BaseModel(SelfAlignModel):
    """Registered as ``gen``; constructed once per test case with its hyperparameters."""
