"""The edge and cloud code models: any generator behind upstream's edgemodel/cloudmodel
interface (see core.scenarios.cloudedge.models for the hyperparameters and the answer cache)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.cloudedge.models import CodeModel

__all__ = ["EdgeModel", "CloudModel"]


@ClassFactory.register(ClassType.GENERAL, alias="EdgeModel")
class EdgeModel(CodeModel):
    """The edge side (registered as ``EdgeModel``)."""


@ClassFactory.register(ClassType.GENERAL, alias="CloudModel")
class CloudModel(CodeModel):
    """The cloud side (registered as ``CloudModel``)."""
