from .data import StreamsGroupCurrentMemberAssignmentKey

__all__ = ("StreamsGroupCurrentMemberAssignmentKey",)
