"""Producer state expires after producer.id.expiration.ms of idleness (open transactions are kept)."""

from __future__ import annotations

from pathlib import Path

from storage_batches import make_batch, open_log

from samsa.kproto.batch import TRANSACTIONAL_BIT

T0 = 1_700_000_000_000
DAY_MS = 86_400_000


def test_idle_producers_expire_and_retries_are_no_longer_recognised(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(make_batch([b"a"], base_timestamp=T0, producer_id=7, producer_epoch=0, base_sequence=0),
                         leader_epoch=0, now_ms=T0)
    log.append_as_leader(make_batch([b"b"], base_timestamp=T0 + DAY_MS // 2, producer_id=8, producer_epoch=0,
                                    base_sequence=0), leader_epoch=0, now_ms=T0 + DAY_MS // 2)
    log.append_as_leader(make_batch([b"t"], base_timestamp=T0, producer_id=9, producer_epoch=0, base_sequence=0,
                                    attributes=TRANSACTIONAL_BIT), leader_epoch=0, now_ms=T0)
    assert log.remove_expired_producers(T0 + DAY_MS - 1, DAY_MS) == 0
    # Producer 7 was idle for a day; 8 was not; 9 has an open transaction and is kept however old.
    assert log.remove_expired_producers(T0 + DAY_MS, DAY_MS) == 1
    assert set(log.producer_states) == {8, 9}
    # A retry of 7's batch is now a new producer's first batch: appended again, as in Kafka.
    again = log.append_as_leader(make_batch([b"a"], base_timestamp=T0 + DAY_MS, producer_id=7, producer_epoch=0,
                                            base_sequence=0), leader_epoch=0, now_ms=T0 + DAY_MS)
    assert not again.duplicate and again.first_offset == 3
    # Producer 8 is still known: its retry is recognised.
    dup = log.append_as_leader(make_batch([b"b"], base_timestamp=T0 + DAY_MS // 2, producer_id=8, producer_epoch=0,
                                          base_sequence=0), leader_epoch=0, now_ms=T0 + DAY_MS)
    assert dup.duplicate and dup.first_offset == 1
