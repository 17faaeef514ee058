from .data import StreamsGroupMemberMetadataKey

__all__ = ("StreamsGroupMemberMetadataKey",)
