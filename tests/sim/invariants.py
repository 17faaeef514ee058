"""Safety invariants of the quorum, checked after every simulated event (TigerBeetle VOPR style).

- at most one leader per epoch;
- a node's epoch never goes backwards, within a run or across a restart (nothing it sent before a
  crash carried a higher epoch than it restarts with: the quorum state was durable before the send);
- a node's high watermark never goes backwards within a run;
- committed entries agree everywhere (same offset → same epoch and payload; equal state-machine
  digests at equal offsets), every new leader holds them, and a majority of voters keeps them durably.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.raft.log import LogEntry
from samsa.raft.quorum_state import Leader

if TYPE_CHECKING:
    from sim.cluster import Node, Simulation


class InvariantViolation(AssertionError):
    pass


def _require(condition: bool, message: Callable[[], str]) -> None:
    """`message` is a lambda: formatting it on every event would cost more than the check."""
    if not condition:
        raise InvariantViolation(message())


class Checker:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: dict[int, LogEntry] = {}
        self.committed_end = 0
        self.committed_payloads: dict[bytes, int] = {}
        self.digests: dict[int, int] = {}
        self._leader_checked: dict[int, int] = {}

    def on_start(self, node: Node) -> None:
        core = node.core
        assert core is not None
        _require(
            core.epoch >= node.max_sent_epoch,
            lambda: f"n{node.node_id} restarted in epoch {core.epoch} but had sent messages in {node.max_sent_epoch}",
        )
        node.last_epoch = core.epoch

    def after_step(self, node: Node) -> None:
        core = node.core
        assert core is not None
        n = node.node_id
        _require(core.epoch >= node.last_epoch, lambda: f"n{n} epoch went back {node.last_epoch} -> {core.epoch}")
        node.last_epoch = core.epoch
        _require(
            core.high_watermark >= node.last_high_watermark,
            lambda: f"n{n} high watermark went back {node.last_high_watermark} -> {core.high_watermark}",
        )
        node.last_high_watermark = core.high_watermark
        if isinstance(core.state, Leader) and self._leader_checked.get(n) != core.epoch:
            self._leader_checked[n] = core.epoch
            other = self.leader_of_epoch.setdefault(core.epoch, n)
            _require(other == n, lambda: f"two leaders in epoch {core.epoch}: n{other} and n{n}")
            self._check_leader_completeness(node)
        # Entries below this node's high watermark are committed ones.
        hw = min(core.high_watermark, self.committed_end)
        c = self.committed.get(hw - 1)
        if core.log.log_start_offset < hw and c is not None:
            entry = core.log.entry(hw - 1)
            _require(entry.epoch == c.epoch, lambda: f"n{n} has {entry} below its HW where {c} was committed")

    def _check_leader_completeness(self, node: Node) -> None:
        core = node.core
        assert core is not None
        end = self.committed_end
        if end == 0:
            return
        log = core.log
        _require(log.end_offset >= end, lambda: f"leader n{node.node_id} lacks committed entries below {end}")
        if end - 1 >= log.log_start_offset:
            c = self.committed[end - 1]
            _require(log.entry(end - 1).epoch == c.epoch, lambda: f"leader n{node.node_id} lacks committed {c}")

    def on_commit(self, node: Node, entry: LogEntry) -> None:
        known = self.committed.get(entry.offset)
        if known is None:
            self.committed[entry.offset] = entry
            self.committed_end = max(self.committed_end, entry.offset + 1)
            self.committed_payloads[entry.payload] = entry.offset
        else:
            _require(
                known.epoch == entry.epoch and known.payload == entry.payload,
                lambda: f"n{node.node_id} committed {entry} where {known} was committed before",
            )

    def on_applied(self, node: Node) -> None:
        sm = node.sm
        known = self.digests.setdefault(sm.applied_offset, sm.digest)
        _require(known == sm.digest, lambda: f"n{node.node_id} state machine differs at offset {sm.applied_offset}")

    def after_event(self) -> None:
        end = self.committed_end
        if end == 0 or self.sim.reconfigured:
            # Once the voters change (KIP-853), a committed entry is on a majority of the set that committed it,
            # which overlaps every later one (one change at a time) without being a majority of it: the
            # election and completeness checks above still hold, this count does not apply.
            return
        last = self.committed[end - 1]
        holders = 0
        for v in self.sim.voter_ids:
            if self.sim.nodes[v].durable.holds(last.offset, last.epoch):
                holders += 1
        if holders < self.sim.config.majority:
            on = sorted(v for v in self.sim.voter_ids if self.sim.nodes[v].durable.holds(last.offset, last.epoch))
            raise InvariantViolation(f"committed {last} is durable only on {on}: a committed entry can be lost")
