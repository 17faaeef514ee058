"""Liveness and readiness of a broker, as /health/live and /health/ready report them.

Ready means clients may rely on this broker: it is registered with the active controller, unfenced,
its metadata image has caught up with the quorum's committed offset, and its listeners are open. A
controller-only node (process.roles=controller) registers nothing: it is ready once caught up and
listening. Each failed check is named, so the 503 body says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker


@dataclass(frozen=True, slots=True)
class Readiness:
    checks: dict[str, bool]
    reasons: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, object]:
        return {"status": "ready" if self.ready else "not ready", "checks": self.checks,
                "reasons": list(self.reasons)}


def readiness(broker: ObservabilityBroker, *, listeners_open: bool) -> Readiness:
    checks: dict[str, bool] = {}
    reasons: list[str] = []

    def check(name: str, ok: bool, why: str) -> None:
        checks[name] = ok
        if not ok:
            reasons.append(why)

    check("caught_up", broker.ready.is_set() and broker.quorum.caught_up,
          "the metadata image has not caught up with the quorum's committed offset")
    if "broker" in broker.roles:
        lifecycle = broker.lifecycle
        check("registered", lifecycle.broker_epoch >= 0, "not registered with the active controller")
        check("unfenced", not lifecycle.fenced and not lifecycle.presumed_fenced(),
              "fenced by the controller (or no heartbeat answered within broker.session.timeout.ms)")
    check("listeners_open", listeners_open, "the client listener is not open yet")
    return Readiness(checks, tuple(reasons))
