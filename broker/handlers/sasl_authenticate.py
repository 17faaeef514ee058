"""SaslAuthenticate (key 36), v0-v2, as the broker answers it: outside authentication.

v1 adds session_lifetime_ms (KIP-368 re-authentication); v2 is flexible. On a SASL listener the
connection's authenticator (broker/security/authenticator.py) answers it while the client authenticates;
one that reaches this handler came after authentication or on a listener without SASL: ILLEGAL_SASL_STATE,
as Kafka's KafkaApis answers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate import v0, v1, v2

    SaslAuthenticateRequest = v0.SaslAuthenticateRequest | v1.SaslAuthenticateRequest | v2.SaslAuthenticateRequest
    SaslAuthenticateResponse = (v0.SaslAuthenticateResponse | v1.SaslAuthenticateResponse
                                | v2.SaslAuthenticateResponse)

API = ApiSpec(key=36, min_version=0, max_version=2)


def handle_sasl_authenticate(request: SaslAuthenticateRequest, ctx: RequestContext) -> SaslAuthenticateResponse:
    cls: type[SaslAuthenticateResponse] = response_class(36, ctx.version)
    return build(cls, {"error_code": ErrorCode.illegal_sasl_state,
                       "error_message": "SaslAuthenticate request received after successful authentication",
                       "auth_bytes": b""})
