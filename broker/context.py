"""What a request handler sees: the request header, the broker's state, and the time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.kproto.messages import RequestHeader

if TYPE_CHECKING:
    from samsa.broker.broker import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str
    now_ms: int
    controller_plane: bool = False  # arrived on the controller listener

    @property
    def version(self) -> int:
        return self.header.api_version
