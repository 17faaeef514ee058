"""Transactions V2 on the wire (KIP-890 part 2), against a `samsa serve`: Produce v12 without
AddPartitionsToTxn, EndTxn v5's bumped epoch and its retry, a late batch of the ended transaction fenced by
the markers' epoch, and an abort with nothing added."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from tests.broker.test_txn import (
    TXN_ARGS,
    committed_values,
    create,
    init_pid,
    produce,
    txn_batch,
    wait_for_internal_topics,
)

REPO = Path(__file__).resolve().parents[2]


class _Process:
    def __init__(self, process: launcher.ServeProcess, port: int) -> None:
        self.process, self.port = process, port

    def connect(self) -> Connection:
        return Connection("127.0.0.1", self.port)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[_Process]:
    port = launcher.free_ports(1)[0]
    overrides = [TXN_ARGS[i + 1] for i in range(0, len(TXN_ARGS), 2)]
    process = launcher.start_serve(launcher.ServeOptions(data_dir=tmp_path / "data", port=port, overrides=overrides),
                                   tmp_path / "samsa.log", cwd=REPO)
    try:
        process.wait_listening(60.0)
        wrapped = _Process(process, port)
        wait_for_internal_topics(wrapped, (0, 1))
        yield wrapped
    finally:
        process.stop(15.0)


def end_txn_v5(conn: Connection, txn_id: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = conn.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                          "committed": commit}, version=5)
    return int(r.error_code.value), int(r.producer_id), int(r.producer_epoch)


def test_produce_v12_end_txn_v5_and_the_fence_of_a_late_batch(serve: _Process) -> None:
    with serve.connect() as conn:
        create(conn, "v2")
        init = init_pid(conn, "tx-v2")
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        assert conn.versions[0][1] >= 12
        # No AddPartitionsToTxn: the leader adds the partition (Produce v12)
        assert produce(conn, "v2", txn_batch(pid, epoch, 0, [b"a"]), txn_id="tx-v2").error_code.value == 0
        assert end_txn_v5(conn, "tx-v2", pid, epoch, True) == (0, pid, epoch + 1)
        assert end_txn_v5(conn, "tx-v2", pid, epoch, True) == (0, pid, epoch + 1)  # a retry: same answer
        assert end_txn_v5(conn, "tx-v2", pid, epoch, False)[0] == 48  # INVALID_TXN_STATE: not what was decided
        # A late batch of the ended transaction carries the old epoch: fenced.
        late = produce(conn, "v2", txn_batch(pid, epoch, 1, [b"late"]), txn_id="tx-v2")
        assert late.error_code.value == 47  # INVALID_PRODUCER_EPOCH
        # The next transaction, with the bumped epoch, from sequence 0; aborted.
        assert produce(conn, "v2", txn_batch(pid, epoch + 1, 0, [b"b"]), txn_id="tx-v2").error_code.value == 0
        assert end_txn_v5(conn, "tx-v2", pid, epoch + 1, False) == (0, pid, epoch + 2)
        # An abort with nothing added still bumps the epoch (no markers); a commit of nothing is refused.
        assert end_txn_v5(conn, "tx-v2", pid, epoch + 2, True)[0] == 48
        assert end_txn_v5(conn, "tx-v2", pid, epoch + 2, False) == (0, pid, epoch + 3)
        assert committed_values(conn, "v2") == [b"a"]
