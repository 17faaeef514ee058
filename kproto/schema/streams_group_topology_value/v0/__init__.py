from .data import StreamsGroupTopologyValue

__all__ = ("StreamsGroupTopologyValue",)
