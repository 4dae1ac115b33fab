"""Revise basemodel: the generator named by ``generator`` answers revise records.

The logic lives in core.scenarios.model (TaskKindModel) and core.scenarios.trajectories.revise.
"""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.model import TaskKindModel

__all__ = ["BaseModel"]


@ClassFactory.register(ClassType.GENERAL, alias="gen")
class BaseModel(TaskKindModel):
    """Registered as ``gen``; constructed once per test case with its hyperparameters."""

    kind = "revise"
