from .data import StreamsGroupTargetAssignmentMemberKey

__all__ = ("StreamsGroupTargetAssignmentMemberKey",)
