"""Error types of the wire protocol and Kafka's error codes (re-exported from kio)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "InvalidRequestError",
    "NewerErrorCode",
    "ProtocolError",
    "UnsupportedVersionError",
]


class ProtocolError(Exception):
    """The peer broke the protocol: log why and close that connection (Kafka: InvalidRequestException)."""


class InvalidRequestError(ProtocolError):
    """A request header or body that cannot be parsed."""


class UnsupportedVersionError(ProtocolError):
    """An (api_key, api_version) that has no schema in kio.

    A broker answers this with UNSUPPORTED_VERSION (ApiVersions: the v0 fallback response) or closes
    the connection, like Kafka's RequestContext does; it never reaches decode_request.
    """

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"no schema for api_key={api_key} api_version={api_version}")
        self.api_key = api_key
        self.api_version = api_version


class NewerErrorCode(int):
    """A Kafka error code newer than kio's ErrorCode (kio 0.6.5 stops at 133), e.g. Kafka 4.4's
    CONTROLLER_ID_NOT_REGISTERED (136): kio's writer writes any error code as its `.value`."""

    @property
    def value(self) -> int:
        return int(self)
