from .data import StreamsGroupTopologyKey

__all__ = ("StreamsGroupTopologyKey",)
