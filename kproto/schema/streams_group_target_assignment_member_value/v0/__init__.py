from .data import StreamsGroupTargetAssignmentMemberValue

__all__ = ("StreamsGroupTargetAssignmentMemberValue",)
