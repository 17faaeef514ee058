from .data import StreamsGroupMetadataKey

__all__ = ("StreamsGroupMetadataKey",)
