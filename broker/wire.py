"""The broker's name for kproto.wire (building kio entities of any version from plain values)."""

from samsa.kproto.wire import build, field, ms

__all__ = ["build", "field", "ms"]
