from .data import StreamsGroupMemberMetadataValue

__all__ = ("StreamsGroupMemberMetadataValue",)
