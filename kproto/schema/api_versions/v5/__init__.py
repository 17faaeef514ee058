from .request import ApiVersionsRequest
from .response import ApiVersionsResponse

__all__ = (
    "ApiVersionsRequest",
    "ApiVersionsResponse",
)
