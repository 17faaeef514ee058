from .data import StreamsGroupMetadataValue

__all__ = ("StreamsGroupMetadataValue",)
