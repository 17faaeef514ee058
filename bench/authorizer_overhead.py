"""What authorization costs a Produce request: the per-request checks (broker.security.acl_requests) of a
10-topic produce, with the authorizer off and on (101 prefixed ACLs, the topics allowed by the last one),
in process, against the same broker code both times (the baseline is the first case).

    .venv/bin/python -m bench.authorizer_overhead [--requests 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.machine import describe
from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.security.acl import (
    STANDARD_AUTHORIZER,
    Acl,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.broker.security.acl_requests import produce_authorization
from samsa.kproto.messages import RequestHeader
from samsa.kproto.records import encode_batch

TOPICS = 10


def measure(overrides: dict[str, str], requests: int) -> float:
    """Microseconds per produce request's authorization."""
    batch = encode_batch([(None, b"v" * 100, ())], timestamp_ms=1, producer_id=7, producer_epoch=0, base_sequence=0)
    topics = [(f"t{i}", [batch]) for i in range(TOPICS)]
    broker = Broker(BrokerConfig(overrides=overrides, data_dir=Path(tempfile.mkdtemp()) / "data"))
    try:
        if overrides:
            acls = [Acl(ResourceType.TOPIC, prefix, PatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
                        AclPermissionType.ALLOW) for prefix in [*(f"x{i}-" for i in range(100)), "t"]]
            broker.controller.acls.create_acls(acls).result()
        header = RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="bench", size_bytes=0)
        ctx = RequestContext(header=header, broker=broker, client_host="127.0.0.1", now_ms=1, principal="User:alice")
        started = time.perf_counter()
        for _ in range(requests):
            checks = produce_authorization(ctx, None, topics)
            for name, batches in topics:
                assert checks.refusal(name, batches[0]) is None
        return (time.perf_counter() - started) / requests * 1e6
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    print(json.dumps(describe()))
    off = measure({}, args.requests)
    on = measure({"authorizer.class.name": STANDARD_AUTHORIZER}, args.requests)
    print(f"authorizer off: {off:.1f} us per {TOPICS}-topic produce request ({off / TOPICS:.2f} us/partition)")
    print(f"authorizer on, 101 ACLs: {on:.1f} us per request ({on / TOPICS:.2f} us/partition), {on / off:.1f}x")


if __name__ == "__main__":
    main()
