from .request import StreamsGroupHeartbeatRequest
from .response import StreamsGroupHeartbeatResponse

__all__ = (
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
)
