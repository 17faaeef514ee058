"""`samsa consume -g`'s consumer group membership: JoinGroup/SyncGroup with Kafka's range assignor when it
leads, heartbeats between fetches, rejoining on REBALANCE_IN_PROGRESS, commits as a member, LeaveGroup at exit
(the classic protocol, as Kafka's ConsumerCoordinator)."""

from __future__ import annotations

import struct
import time
from typing import Any

from samsa.broker.cli.commands.client import RoutingClient
from samsa.broker.cli.commands.errors import CliError, KafkaError, check
from samsa.broker.group.consumer_protocol import assigned_partitions, subscribed_topics

SESSION_TIMEOUT_MS = 45000  # session.timeout.ms
REBALANCE_TIMEOUT_MS = 25000  # below the request timeout: JoinGroup can wait this long for the others
HEARTBEAT_INTERVAL_MS = 3000  # heartbeat.interval.ms
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, MEMBER_ID_REQUIRED = 25, 27, 22, 79
MAX_JOIN_ATTEMPTS = 20


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t.encode())) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(partitions))
    for t, ps in sorted(partitions.items()):
        out += struct.pack(">h", len(t.encode())) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def range_assign(subscriptions: dict[str, set[str]], partition_counts: dict[str, int]) -> dict[str, dict[str,
                                                                                                       list[int]]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member-id order get consecutive ranges, the first
    `count % members` one partition more."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partition_counts.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic] = list(range(start, start + n))
            start += n
    return out


class GroupMember:
    def __init__(self, client: RoutingClient, group: str, topic: str) -> None:
        self.client = client
        self.group = group
        self.topic = topic
        self.member_id = ""
        self.generation = -1
        self.last_heartbeat = 0.0

    def _request(self, api_key: int, values: dict[str, Any], error_of: Any = None) -> Any:
        return self.client.group_request(self.group, api_key, values,
                                         error_of=error_of or (lambda r: r.error_code.value))

    def join(self) -> list[int]:
        """Join (or rejoin) and sync; the partitions of our topic this member is assigned."""
        for _ in range(MAX_JOIN_ATTEMPTS):
            j = self._request(11, {"group_id": self.group, "session_timeout": SESSION_TIMEOUT_MS,
                                   "rebalance_timeout": REBALANCE_TIMEOUT_MS, "member_id": self.member_id,
                                   "group_instance_id": None, "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": subscription([self.topic])}],
                                   "reason": "samsa consume"})
            code = j.error_code.value
            if code == MEMBER_ID_REQUIRED:  # KIP-394: join again with the id the coordinator gave
                self.member_id = j.member_id
                continue
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code == REBALANCE_IN_PROGRESS:
                continue
            check(code, f"joining group {self.group!r}")
            self.member_id, self.generation = j.member_id, j.generation_id
            assignments = self._lead(j.members) if j.leader == j.member_id else {}
            s = self._request(14, {"group_id": self.group, "generation_id": self.generation,
                                   "member_id": self.member_id, "group_instance_id": None,
                                   "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": [{"member_id": m, "assignment": a}
                                                   for m, a in assignments.items()]})
            code = s.error_code.value
            if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
                continue
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            check(code, f"syncing group {self.group!r}")
            self.last_heartbeat = time.monotonic()
            parsed = assigned_partitions(bytes(s.assignment or b"")) or []
            return sorted(p for t, ps in parsed if t == self.topic for p in ps)
        raise CliError(f"group {self.group!r} kept rebalancing ({MAX_JOIN_ATTEMPTS} joins); try again")

    def _lead(self, members: Any) -> dict[str, bytes]:
        subscriptions = {m.member_id: subscribed_topics(bytes(m.metadata)) or set() for m in members}
        counts: dict[str, int] = {}
        for topic in set().union(*subscriptions.values()):
            try:
                counts[topic] = len(self.client.topic(topic).partitions)
            except CliError:
                continue  # a topic some member wants that does not exist: nothing to assign
        return {m: assignment(a) for m, a in range_assign(subscriptions, counts).items()}

    def maybe_heartbeat(self) -> bool:
        """Heartbeat when due; True when the group is rebalancing and this member must rejoin."""
        if time.monotonic() - self.last_heartbeat < HEARTBEAT_INTERVAL_MS / 1000:
            return False
        r = self._request(12, {"group_id": self.group, "generation_id": self.generation,
                               "member_id": self.member_id, "group_instance_id": None})
        self.last_heartbeat = time.monotonic()
        code = r.error_code.value
        if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return True
        check(code, f"heartbeat to group {self.group!r}")
        return False

    def commit(self, positions: dict[int, int]) -> bool:
        """Commit as this member; False when a rebalance took the generation away (the next join settles it)."""
        if not positions:
            return True

        def first_error(r: Any) -> int:
            return next((p.error_code.value for t in r.topics for p in t.partitions if p.error_code.value), 0)

        r = self._request(8, {"group_id": self.group, "generation_id_or_member_epoch": self.generation,
                              "member_id": self.member_id, "group_instance_id": None,
                              "topics": [{"name": self.topic, "partitions": [
                                  {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                   "committed_metadata": ""} for p, o in sorted(positions.items())]}]},
                          error_of=first_error)
        code = first_error(r)
        if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            return False
        if code:
            raise KafkaError(code, f"commit to group {self.group!r}")
        return True

    def leave(self) -> None:
        if not self.member_id:
            return
        self._request(13, {"group_id": self.group, "member_id": self.member_id,
                           "members": [{"member_id": self.member_id, "group_instance_id": None,
                                        "reason": "samsa consume exits"}]})
        self.member_id = ""
