"""broker/internal_topic.py against a fake broker: creation on first use, coordinator errors, and the
loaded/lost partition bookkeeping both coordinators rely on when leadership moves."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from samsa.broker.controller import TopicSpec
from samsa.broker.controller_types import TopicResult
from samsa.broker.internal_topic import InternalTopic
from samsa.kproto.errors import ErrorCode

NAME = "__consumer_offsets"


class FakeBroker:
    def __init__(self, live: int, create: ErrorCode | None) -> None:
        self.node_id = 1
        self.topics: dict[str, Any] = {}
        self.leaders: dict[int, int] = {}
        self.created: list[TopicSpec] = []
        self._create = create
        self.image = SimpleNamespace(topics_by_name=self.topics)
        self.controller = SimpleNamespace(live_brokers=lambda: list(range(live)))
        self.replica_manager = SimpleNamespace(get_partition=self._get_partition)
        self.config = SimpleNamespace(get_int=self._get_int)

    def _get_int(self, key: str) -> int:
        raise KeyError(key)

    def _get_partition(self, topic: str, index: int) -> Any:
        leader = self.leaders.get(index)
        return None if topic != NAME or leader is None else SimpleNamespace(leader_id=leader)

    def create_topics_soon(self, specs: list[TopicSpec]) -> list[TopicResult] | None:
        self.created.extend(specs)
        if self._create is None:
            return None
        if self._create == ErrorCode.none:
            self.topics[NAME] = SimpleNamespace(partitions={i: None for i in range(specs[0].num_partitions)})
        return [TopicResult(NAME, self._create)]

    def partition_leader(self, topic: str, partition: int) -> tuple[ErrorCode, Any]:
        leader = self.leaders.get(partition)
        return (ErrorCode.none, leader) if leader is not None else (ErrorCode.coordinator_not_available, None)


def topic_of(broker: FakeBroker) -> InternalTopic:
    return InternalTopic(broker, NAME, 3, "offsets.topic.replication.factor", {"cleanup.policy": "compact"},
                         lambda key, partitions: int(key) % partitions)


def test_created_once_with_a_replication_factor_capped_by_the_live_brokers() -> None:
    broker = FakeBroker(live=2, create=ErrorCode.none)
    topic = topic_of(broker)
    broker.leaders = {0: 1, 1: 2}
    assert topic.coordinator_error("0") == ErrorCode.none  # created, and partition 0 is led here
    assert topic.coordinator_error("1") == ErrorCode.not_coordinator  # led by broker 2
    assert topic.coordinator_error("2") == ErrorCode.coordinator_not_available  # led by nobody yet
    assert [(s.name, s.num_partitions, s.replication_factor, dict(s.configs or {})) for s in broker.created] == [
        (NAME, 3, 2, {"cleanup.policy": "compact"})]


def test_not_available_while_the_controller_creates_it_or_when_it_refuses() -> None:
    pending = FakeBroker(live=1, create=None)
    assert topic_of(pending).ensure() == ErrorCode.coordinator_not_available
    refused = FakeBroker(live=1, create=ErrorCode.policy_violation)
    assert topic_of(refused).ensure() == ErrorCode.coordinator_not_available
    raced = FakeBroker(live=1, create=ErrorCode.topic_already_exists)
    assert topic_of(raced).ensure() == ErrorCode.none


def test_partitions_are_loaded_once_while_led_and_given_up_when_lost() -> None:
    broker = FakeBroker(live=1, create=ErrorCode.none)
    topic = topic_of(broker)
    assert list(topic.partitions_to_load()) == []  # no topic yet
    assert topic.ensure() == ErrorCode.none
    broker.leaders = {0: 1, 1: 2, 2: 1}
    assert [index for index, _ in topic.partitions_to_load()] == [0, 2]
    assert list(topic.partitions_to_load()) == []  # already loaded
    broker.leaders = {0: 2, 1: 1, 2: 1}
    assert topic.take_lost() == {0}
    assert topic.take_lost() == set()
    assert [index for index, _ in topic.partitions_to_load()] == [1]  # led here now; 0 is not
    broker.leaders[0] = 1
    assert [index for index, _ in topic.partitions_to_load()] == [0]  # led again: replayed again
