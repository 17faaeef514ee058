from .data import StreamsGroupTargetAssignmentMetadataValue

__all__ = ("StreamsGroupTargetAssignmentMetadataValue",)
