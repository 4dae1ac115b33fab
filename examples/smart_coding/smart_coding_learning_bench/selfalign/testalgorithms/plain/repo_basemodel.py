"""Plain generation of repository functions (the repo kind's basemodel): one reply per task, no
tests, no loop. Its pass@1 on the same tasks in the same run is what the self-align loop is
compared with. The logic lives in core.scenarios.model (TaskKindModel)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.model import TaskKindModel

__all__ = ["RepoPlainModel"]


@ClassFactory.register(ClassType.GENERAL, alias="repoplain")
class RepoPlainModel(TaskKindModel):
    """Registered as ``repoplain``; constructed once per test case with its hyperparameters."""

    kind = "repo"
