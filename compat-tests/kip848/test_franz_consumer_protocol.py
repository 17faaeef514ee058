"""franz-go consumers in KIP-848 mode (kgo.ServerSideBalancer: ConsumerGroupHeartbeat v1) against Samsa.

Against Samsa and against the Kafka oracle (with the same short consumer-group session). The scenario of the
librdkafka test: three members share a 6-partition topic; one is SIGKILLed (its partitions
move once its session expires), one closes (it leaves with member epoch -1), and the last one ends with every
partition. Every record is consumed exactly once across the members: each commits a record synchronously
before counting it. The group is checked to be a consumer group, so a silent fall-back of franz-go to the
classic protocol would fail the test.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import KafkaBroker
from harness848 import (
    FRANZ_MEMBER,
    PARTITIONS,
    consumed,
    franz_member,
    owned,
    produce,
    stop_all,
    wait_balanced,
    wait_consumed,
)
from samsa_fixture import SamsaProcess

pytestmark = pytest.mark.skipif(not FRANZ_MEMBER.exists(), reason="franz-go member not built (make compat-deps, "
                                "which needs go)")


@pytest.mark.parametrize("target", ["samsa", "kafka"])
def test_franz_members_join_one_dies_one_leaves_every_record_once(target: str, request: pytest.FixtureRequest,
                                                                   tmp_path: Path) -> None:
    broker: SamsaProcess | KafkaBroker = request.getfixturevalue(f"{target}_kip848")
    bootstrap = broker.bootstrap
    topic, group = "kip848-franz", "kip848-franz-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"member-{i}.out" for i in range(3)]
    workers = [franz_member(bootstrap, group, topic, out) for out in outputs]
    try:
        wait_balanced(outputs, broker)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
        assert str(listed[group].type).lower().endswith("consumer")  # KIP-848, not the classic protocol
        batch1 = produce(bootstrap, topic, "b1")
        wait_consumed(outputs, batch1, broker)

        workers[0].send_signal(signal.SIGKILL)  # its partitions move after group.consumer.session.timeout.ms
        workers[0].wait(10)
        batch2 = produce(bootstrap, topic, "b2")
        wait_consumed(outputs[1:], batch2, broker)

        workers[1].send_signal(signal.SIGTERM)  # Close(): leaves the group with epoch -1
        assert workers[1].wait(60) == 0
        assert outputs[1].read_text().splitlines()[-1] == "closed"
        batch3 = produce(bootstrap, topic, "b3")
        wait_consumed(outputs[2:], batch3, broker)
        assert owned(outputs[2]) == set(range(PARTITIONS))
    finally:
        stop_all(workers)
    seen = consumed(outputs)
    assert set(seen) == batch1 | batch2 | batch3
    assert [v for v, n in seen.items() if n != 1] == []
    for out in outputs:
        assert any(line.startswith("record ") for line in out.read_text().splitlines()), out.read_text()
