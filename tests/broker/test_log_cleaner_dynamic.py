"""The log cleaner follows its dynamic broker configs, as Kafka's LogCleaner.reconfigure (issue 16): a change
of log.cleaner.threads starts or retires cleaner tasks, a change of log.cleaner.dedupe.buffer.size is used
by the next cleaning, and AlterConfigs accepts the keys Kafka makes dynamic."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from samsa.broker.client import Connection
from samsa.broker.config import BROKER_SCHEMA, BrokerConfig, validate_broker_config
from samsa.broker.log_cleaner import LogCleaner, threads_reconfiguration_error
from samsa.kproto.records import encode_batch
from samsa.storage.cleaner_manager import LogCleaningCandidate
from samsa.storage.config import LogConfig
from samsa.storage.log import Log
from samsa.storage.log_manager import LogManager

NOW_MS = 1_700_000_000_000
BOUND_S = 20.0  # every wait below is bounded: a cleaner that never does it fails the test instead of hanging
SET = 0
BROKER = 4  # ConfigResource type BROKER

# Kafka 4.1's LogCleaner.ReconfigurableConfigs, and the topic defaults its DynamicLogConfig makes dynamic
KAFKA_DYNAMIC_CLEANER_KEYS = (
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    "log.cleaner.delete.retention.ms", "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
)


def _dirty_logs(data_dir: Path, topics: list[str], keys: int = 4, records: int = 40) -> LogManager:
    """Compacted logs whose closed segments are all dirty, each key written records/keys times."""
    manager = LogManager(data_dir)
    config = LogConfig(segment_bytes=400, retention_ms=-1, file_delete_delay_ms=0, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01)
    for topic in topics:
        log = manager.get_or_create_log(topic, 0, config, NOW_MS)
        for i in range(records):
            log.append_as_leader(encode_batch([(b"k%d" % (i % keys), b"v%d" % i, ())], timestamp_ms=NOW_MS),
                                 leader_epoch=0, now_ms=NOW_MS)
        log.roll(NOW_MS)
        log.update_high_watermark(log.log_end_offset)
    return manager


def _config(**dynamic: str) -> BrokerConfig:
    """A broker config with `dynamic` as cluster-default dynamic configs (dots for underscores)."""
    return BrokerConfig(overrides={"log.cleaner.backoff.ms": "10"}).with_dynamic(
        {k.replace("_", "."): v for k, v in dynamic.items()}, {})


class _BlockingCleaner(LogCleaner):
    """Each cleaning waits for `release` (made inside the event loop), so the cleanings at once can be counted."""

    release: anyio.Event

    def __init__(self, manager: LogManager, config: Callable[[], BrokerConfig]) -> None:
        super().__init__(manager, config, reconfigure_check_s=0.01)
        self.active: set[tuple[str, int]] = set()
        self.started: list[tuple[str, int]] = []
        self.most_at_once = 0

    async def _clean(self, key: tuple[str, int], log: Log, candidate: LogCleaningCandidate, now_ms: int,
                     thread: int) -> None:
        self.active.add(key)
        self.started.append(key)
        self.most_at_once = max(self.most_at_once, len(self.active))
        try:
            await self.release.wait()
        finally:
            self.active.discard(key)


async def _until(condition: Callable[[], bool], what: str) -> None:
    with anyio.move_on_after(BOUND_S):
        while not condition():
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"not within {BOUND_S} s: {what}")


def test_a_change_of_threads_starts_and_retires_cleaner_tasks(tmp_path: Path) -> None:
    current = [_config(log_cleaner_threads="1")]
    cleaner = _BlockingCleaner(_dirty_logs(tmp_path / "data", ["a", "b", "c"]), lambda: current[0])

    async def scenario() -> None:
        cleaner.release = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(cleaner.run)
            await _until(lambda: len(cleaner.active) == 1, "one cleaning")
            await anyio.sleep(0.2)  # a second thread would have picked one of the two other dirty logs by now
            assert len(cleaner.active) == 1 and cleaner.running_threads == {0}

            current[0] = _config(log_cleaner_threads="2")
            await _until(lambda: len(cleaner.active) == 2, "two cleanings at once")
            assert cleaner.running_threads == {0, 1}

            current[0] = _config(log_cleaner_threads="0")  # Kafka refuses it: the two tasks stay
            await anyio.sleep(0.2)
            assert cleaner.threads == 2 and cleaner.running_threads == {0, 1}

            current[0] = _config(log_cleaner_threads="1")
            cleaner.release.set()  # both cleanings end; task 1 is surplus and exits, task 0 goes on cleaning
            await _until(lambda: cleaner.running_threads == {0}, "the surplus cleaner task to exit")
            await _until(lambda: len(cleaner.started) > 2, "cleaning to go on")
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    assert cleaner.most_at_once == 2
    assert len(set(cleaner.started[:2])) == 2


def test_threads_change_by_at_most_double_or_half_and_never_below_one() -> None:
    # Kafka's LogCleaner.validateReconfiguration, with its messages
    assert threads_reconfiguration_error(1, 0) == "Log cleaner threads should be at least 1"
    assert threads_reconfiguration_error(1, 2) is None
    assert threads_reconfiguration_error(1, 3) == (
        "Log cleaner threads cannot be increased to more than double the current value 1")
    assert threads_reconfiguration_error(4, 8) is None
    assert threads_reconfiguration_error(4, 2) is None
    assert threads_reconfiguration_error(5, 2) is None  # 5 / 2 rounds down, as Java's int division
    assert threads_reconfiguration_error(6, 2) == (
        "Log cleaner threads cannot be reduced to less than half the current value 6")
    assert threads_reconfiguration_error(0, 1) == (
        "Log cleaner threads cannot be increased to more than double the current value 0")


def test_a_refused_thread_count_reaching_the_config_is_not_applied(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    current = [_config(log_cleaner_threads="2")]
    cleaner = LogCleaner(_dirty_logs(tmp_path / "data", ["a"]), lambda: current[0])
    current[0] = _config(log_cleaner_threads="5")
    with caplog.at_level("ERROR"):
        assert cleaner.threads == 2
        assert cleaner.threads == 2
    assert [r.getMessage() for r in caplog.records if "not applied" in r.getMessage()] == [
        "log cleaner: log.cleaner.threads=5 not applied (Log cleaner threads cannot be increased to more than "
        "double the current value 2); still 2"]
    current[0] = _config(log_cleaner_threads="4")
    assert cleaner.threads == 4


def test_a_change_of_the_dedupe_buffer_is_used_by_the_next_cleaning(tmp_path: Path) -> None:
    # 40 distinct keys; a buffer of 10 slots (24 bytes each) at load factor 0.9 maps 9 keys per cleaning
    current = [_config(log_cleaner_dedupe_buffer_size=str(24 * 10))]
    cleaner = LogCleaner(_dirty_logs(tmp_path / "data", ["t"], keys=40, records=40), lambda: current[0])
    cleaned_up_to = cleaner.figures.last_cleaned_offset
    assert cleaned_up_to is not None

    async def clean() -> None:
        assert await cleaner.clean_once(NOW_MS)

    anyio.run(clean)
    assert cleaned_up_to[("t", 0)] == 9
    assert cleaner.figures.last_stats[0].buffer_utilization == pytest.approx(0.9)
    anyio.run(clean)
    assert cleaned_up_to[("t", 0)] == 18  # the same buffer: 9 keys more

    current[0] = _config(log_cleaner_dedupe_buffer_size=str(1024 * 1024))
    anyio.run(clean)
    assert cleaned_up_to[("t", 0)] == 40  # the whole rest in one cleaning
    assert cleaner.figures.last_stats[0].buffer_utilization < 0.01

    # two threads share the buffer (Kafka: dedupe.buffer.size / threads): 10 slots again at 20 slots' bytes
    manager = _dirty_logs(tmp_path / "data2", ["u"], keys=40, records=40)
    shared = LogCleaner(manager, lambda: _config(log_cleaner_dedupe_buffer_size=str(24 * 20),
                                                 log_cleaner_threads="2"))
    assert anyio.run(shared.clean_once, NOW_MS)
    assert shared.figures.last_cleaned_offset == {("u", 0): 9}


def test_kafkas_dynamic_cleaner_configs_are_dynamic_and_enable_is_static() -> None:
    for name in KAFKA_DYNAMIC_CLEANER_KEYS:
        assert BROKER_SCHEMA[name].dynamic, name
        assert validate_broker_config(name, BROKER_SCHEMA[name].default) is None, name
    assert validate_broker_config("log.cleaner.enable", "false") == (
        "Cannot update these configs dynamically: [log.cleaner.enable]")
    assert validate_broker_config("log.cleaner.threads", "-1") is not None


def test_incremental_alter_configs_of_cleaner_threads_on_the_cluster_default(samsa: Any, conn: Connection) -> None:
    def alter(name: str, value: str) -> tuple[int, str | None]:
        r = conn.request(44, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
            {"name": name, "config_operation": SET, "value": value}]}], "validate_only": False}, version=1)
        return r.responses[0].error_code.value, r.responses[0].error_message

    def described() -> list[tuple[str, str | None]]:
        r = conn.request(32, {"resources": [{"resource_type": BROKER, "resource_name": "",
                                             "configuration_keys": ["log.cleaner.threads"]}],
                              "include_synonyms": False, "include_documentation": False}, version=4)
        return [(c.name, c.value) for c in r.results[0].configs]

    # Kafka's LogCleaner.validateReconfiguration, against this broker's 1 thread: INVALID_CONFIG
    assert alter("log.cleaner.threads", "0") == (40, "Log cleaner threads should be at least 1")
    assert alter("log.cleaner.threads", "3") == (
        40, "Log cleaner threads cannot be increased to more than double the current value 1")
    for name, value in (("log.cleaner.threads", "2"), ("log.cleaner.dedupe.buffer.size", "1048576"),
                        ("log.cleaner.io.buffer.size", "1048576")):
        error, message = alter(name, value)
        assert error == 0, message
    assert alter("log.cleaner.enable", "false") == (
        42, "Cannot update these configs dynamically: [log.cleaner.enable]")
    deadline = time.monotonic() + BOUND_S
    while described() != [("log.cleaner.threads", "2")] or \
            "log.cleaner.threads changed from 1 to 2" not in samsa.log_tail(1000):
        assert time.monotonic() < deadline, f"the broker's cleaner never followed the change:\n{samsa.log_tail()}"
        time.sleep(0.2)
