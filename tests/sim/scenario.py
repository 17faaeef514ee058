"""One seeded run: faults for a while, then heal and demand progress within a bound (liveness)."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from samsa.raft.events import Resign
from sim.cluster import FaultPlan, Simulation

LIVENESS_BOUND_MS = 15_000  # after healing: a leader, a committed proposal, every node caught up


@dataclass(frozen=True)
class Outcome:
    seed: int
    voters: int
    events_count: int
    committed_count: int
    healed_at_ms: int
    recovered_ms: int  # time from heal until a post-heal proposal was committed on every node


class LivenessFailure(AssertionError):
    pass


def run_seed(seed: int, trace_lines: deque[str] | None = None) -> Outcome:
    trace = trace_lines.append if trace_lines is not None else None
    r = random.Random(seed)
    voters = r.choice([3, 5])
    overrides = {
        "fetch_max_entries_count": r.choice([1, 2, 16]),
        "snapshot_chunk_bytes": r.choice([16, 64, 1024]),
        "max_uncommitted_count": 200,
    }
    sim = Simulation(seed, voters, observers=r.choice([1, 2]), config_overrides=overrides, trace=trace)
    sim.snapshot_every_count = r.choice([5, 20, 1_000_000])
    fault_end_ms = r.randint(5_000, 20_000)
    sim.faults = FaultPlan(
        drop_rate=r.choice([0.0, 0.01, 0.05, 0.2]),
        dup_rate=r.choice([0.0, 0.02, 0.1]),
        max_delay_ms=r.choice([2, 10, 50, 200]),
    )
    fault_gap_ms = r.choice([100, 400, 1_000, 2_500])
    # KIP-853 voter changes in half the seeds, from their own generator: the other half replay as before.
    reconfig_rng = random.Random(seed ^ 0x853)
    reconfigure = reconfig_rng.random() < 0.5
    client_gap_ms = r.choice([5, 30, 100])
    all_ids = sorted(sim.nodes)

    def client() -> None:
        sim.propose(r.randint(1, 3))
        gap_ms = client_gap_ms if sim.now_ms < fault_end_ms else 100  # let a backlog drain after healing
        sim.at(sim.now_ms + r.randint(1, gap_ms * 2), client)

    def fault() -> None:
        if sim.now_ms >= fault_end_ms:
            return
        kind = r.choice(
            ["crash", "crash_leader", "partition", "isolate_leader", "one_way", "heal", "heal", "slow_disk", "resign"]
        )
        leaders = sim.leaders()
        match kind:
            case "crash":
                sim.crash(r.choice(all_ids), r.randint(50, 2_000))
            case "crash_leader" if leaders:
                sim.crash(leaders[0], r.randint(50, 3_000))
            case "partition":
                shuffled = r.sample(all_ids, len(all_ids))
                cut = r.randint(1, len(all_ids) - 1)
                sim.partition([set(shuffled[:cut]), set(shuffled[cut:])])
            case "isolate_leader" if leaders:
                rest = set(all_ids) - {leaders[0]}
                sim.partition([{leaders[0]}, rest])
            case "one_way":
                a, b = r.sample(all_ids, 2)
                sim.blocked.add((a, b))
            case "heal":
                sim.heal()
            case "slow_disk":
                node = sim.nodes[r.choice(all_ids)]
                node.slow_disk = not node.slow_disk
            case "resign" if leaders:
                node = sim.nodes[leaders[0]]
                assert node.core is not None
                sim._after_core(node, node.core.step(Resign(), sim.now_ms))
            case _:
                pass
        if reconfigure and reconfig_rng.random() < 0.3:
            sim.change_voters(reconfig_rng)
        sim.at(sim.now_ms + r.randint(fault_gap_ms // 2, fault_gap_ms * 3 // 2), fault)

    sim.at(r.randint(0, 500), client)
    sim.at(r.randint(0, 1_000), fault)
    sim.run_until(fault_end_ms)

    sim.heal()
    sim.faults = FaultPlan()
    for node in sim.nodes.values():
        node.slow_disk = False
    healed_at_ms = sim.now_ms
    while sim.now_ms < healed_at_ms + LIVENESS_BOUND_MS:
        sim.run_until(sim.now_ms + 100)
        committed = [
            o for p, o in sim.checker.committed_payloads.items() if sim.proposed.get(p, -1) > healed_at_ms
        ]
        if not committed:
            continue
        offset = min(committed)
        if all(n.core is not None and n.sm.applied_offset > offset for n in sim.nodes.values()):
            progress_ms = sim.now_ms
            while not sim.voter_set_converged():
                if sim.now_ms >= progress_ms + LIVENESS_BOUND_MS:
                    raise LivenessFailure(f"the voter set did not come to say what every voter is within "
                                          f"{LIVENESS_BOUND_MS} ms of the progress at {progress_ms} ms")
                sim.run_until(sim.now_ms + 100)
            return Outcome(
                seed, voters, sim.events_count, sim.checker.committed_end, healed_at_ms, progress_ms - healed_at_ms
            )
    states = {
        n.node_id: (type(n.core.state).__name__, n.core.epoch, n.core.high_watermark, n.core.log.end_offset)
        if n.core
        else "down"
        for n in sim.nodes.values()
    }
    raise LivenessFailure(
        f"no progress within {LIVENESS_BOUND_MS} ms after healing at {healed_at_ms} ms; "
        f"nodes (role, epoch, hw, log end): {states}"
    )
