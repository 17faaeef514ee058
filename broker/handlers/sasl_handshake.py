"""SaslHandshake (key 17), v0-v1, as the broker answers it: outside authentication.

v0 is followed by raw SASL tokens (the legacy framing); v1 by SaslAuthenticate requests (KIP-152).
On a SASL listener the handshake is answered by the connection's authenticator
(broker/security/authenticator.py) before the broker sees any request, and again for a KIP-368
re-authentication. A handshake that reaches this handler came on a listener without SASL, or out of turn:
ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it, listing the mechanisms the broker enables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.sasl_handshake import v0, v1

    SaslHandshakeRequest = v0.SaslHandshakeRequest | v1.SaslHandshakeRequest
    SaslHandshakeResponse = v0.SaslHandshakeResponse | v1.SaslHandshakeResponse

API = ApiSpec(key=17, min_version=0, max_version=1)


def handle_sasl_handshake(request: SaslHandshakeRequest, ctx: RequestContext) -> SaslHandshakeResponse:
    cls: type[SaslHandshakeResponse] = response_class(17, ctx.version)
    return build(cls, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": ()})
