"""The log cleaner's figures on /metrics (Kafka's kafka.log:type=LogCleaner / LogCleanerManager names),
scraped from a broker in this process after cleanings it really did (issue 16)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.kproto.records import encode_batch
from samsa.storage.log import Log
from tests.broker.observability.test_traffic import create, produce, scrape, value

KEYS = 4
RECORDS = 40


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(overrides={"offsets.topic.num.partitions": "1", "log.cleaner.min.cleanable.ratio": "0.01"},
                            data_dir=tmp_path / "data"))
    yield b
    b.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def compacted_log(broker: Broker, topic: str) -> Log:
    """A compacted topic holding RECORDS updates of KEYS keys, rolled so that all of it is cleanable."""
    create(broker, topic, configs={"cleanup.policy": "compact"})
    for i in range(RECORDS):
        records = encode_batch([(b"k%d" % (i % KEYS), b"v%d" % i, ())], timestamp_ms=now_ms())
        assert produce(broker, topic, 0, records).responses[0].partition_responses[0].error_code == 0
    partition = broker.replica_manager.get_partition(topic, 0)
    assert partition is not None
    partition.log.roll(now_ms())
    return partition.log


def clean_all(broker: Broker) -> int:
    async def main() -> int:
        n = 0
        while await broker.log_cleaner.clean_once(now_ms()):
            n += 1
        return n
    return anyio.run(main)


def test_a_cleaning_shows_in_the_cleaner_figures(broker: Broker) -> None:
    before = scrape(broker)
    assert value(before, "samsa_log_cleaner_cleanings_total") == 0
    assert value(before, "kafka_log_logcleaner_max_clean_time_secs") == 0
    log = compacted_log(broker, "compacted")
    size = log.size_bytes
    assert clean_all(broker) == 1
    samples = scrape(broker)
    assert value(samples, "samsa_log_cleaner_cleanings_total") == 1
    read = value(samples, "samsa_log_cleaner_cleaned_bytes_total")
    written = value(samples, "samsa_log_cleaner_written_bytes_total")
    assert read >= size  # the recopy read every batch (and the offset map's pass too)
    assert 0 < written < size - log.segments[-1].size_bytes
    assert written == log.size_bytes - log.segments[-1].size_bytes  # the cleaned segments hold what it wrote
    assert value(samples, "kafka_log_logcleaner_cleaner_recopy_percent") == pytest.approx(
        100 * written / broker.log_cleaner.figures.last_stats[0].bytes_read)
    assert 0 < value(samples, "kafka_log_logcleaner_cleaner_recopy_percent") < 100 * KEYS / RECORDS * 2
    assert 0 < value(samples, "kafka_log_logcleaner_max_buffer_utilization_percent") <= 100
    assert value(samples, "kafka_log_logcleaner_max_clean_time_secs") > 0
    # at the last pick (the one that found nothing left to clean) no log was dirty any more
    assert value(samples, "kafka_log_logcleanermanager_max_dirty_percent") == 0
    log_dir = str(broker.log_manager.data_dir.resolve())
    assert value(samples, "kafka_log_logcleanermanager_uncleanable_partitions_count", log_dir=log_dir) == 0
    assert value(samples, "kafka_log_logcleanermanager_uncleanable_bytes", log_dir=log_dir) == 0


def test_max_dirty_percent_is_the_dirtiest_log_at_the_pick(broker: Broker) -> None:
    compacted_log(broker, "compacted")
    assert broker.log_cleaner.grab_filthiest(now_ms()) is not None
    assert value(scrape(broker), "kafka_log_logcleanermanager_max_dirty_percent") == 100  # never cleaned


def test_a_corrupt_log_counts_as_uncleanable_with_its_dirty_bytes(broker: Broker) -> None:
    log = compacted_log(broker, "broken")
    path = log.segments[0].log_path
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    path.write_bytes(bytes(data))
    clean_all(broker)
    samples = scrape(broker)
    log_dir = str(broker.log_manager.data_dir.resolve())
    assert value(samples, "kafka_log_logcleanermanager_uncleanable_partitions_count", log_dir=log_dir) == 1
    assert value(samples, "kafka_log_logcleanermanager_uncleanable_bytes", log_dir=log_dir) == \
        log.size_bytes - log.segments[-1].size_bytes
    assert value(samples, "samsa_log_cleaner_cleanings_total") == 0
