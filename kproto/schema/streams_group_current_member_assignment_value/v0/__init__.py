from .data import StreamsGroupCurrentMemberAssignmentValue

__all__ = ("StreamsGroupCurrentMemberAssignmentValue",)
