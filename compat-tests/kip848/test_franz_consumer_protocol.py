"""franz-go consumers in KIP-848 mode (kgo.ServerSideBalancer: ConsumerGroupHeartbeat v1) against Samsa.

Against Samsa and against the Kafka oracle (with the same short consumer-group session). The scenario of the
librdkafka test: three members share a 6-partition topic; one is SIGKILLed (its partitions
move once its session expires), one closes (it leaves with member epoch -1), and the last one ends with every
partition. Every record is consumed exactly once across the members: each commits a record synchronously
before counting it. The group is checked to be a consumer group, so a silent fall-back of franz-go to the
classic protocol would fail the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from conftest import KafkaBroker
from harness848 import FRANZ_MEMBER, franz_member, join_kill_leave
from samsa_fixture import SamsaProcess

pytestmark = pytest.mark.skipif(not FRANZ_MEMBER.exists(), reason="franz-go member not built (make compat-deps, "
                                "which needs go)")


@pytest.mark.parametrize("target", ["samsa", "kafka"])
def test_franz_members_join_one_dies_one_leaves_every_record_once(target: str, request: pytest.FixtureRequest,
                                                                   tmp_path: Path) -> None:
    broker: SamsaProcess | KafkaBroker = request.getfixturevalue(f"{target}_kip848")
    group = "kip848-franz-group"

    def is_consumer_group() -> None:  # KIP-848, not a silent fall-back to the classic protocol
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
        assert str(listed[group].type).lower().endswith("consumer")

    join_kill_leave(broker, tmp_path, franz_member, "kip848-franz", group, after_join=is_consumer_group)
