from .data import StreamsGroupTargetAssignmentMetadataKey

__all__ = ("StreamsGroupTargetAssignmentMetadataKey",)
