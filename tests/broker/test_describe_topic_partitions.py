"""DescribeTopicPartitions (key 75) pages through topics and partitions; ListConfigResources (key 74) lists
the resources that have configs. Over the wire of one `samsa serve` (the same cases run against the reference Kafka
in compat-tests/differential/newer_apis.py)."""

from __future__ import annotations

from typing import Any

from samsa.broker.client import Connection

TOPICS = {"dtp-a": 3, "dtp-b": 2, "dtp-c": 1}


def _create(conn: Connection) -> None:
    for name, partitions in TOPICS.items():
        r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                          "assignments": (), "configs": ()}], "timeout": 5000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0


def _dtp(conn: Connection, topics: list[str], limit: int = 2000,
         cursor: tuple[str, int] | None = None) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    r = conn.request(75, {"topics": [{"name": t} for t in topics], "response_partition_limit": limit,
                          "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                                 "partition_index": cursor[1]}}, version=0)
    page = [(t.name, t.error_code.value, [p.partition_index for p in t.partitions]) for t in r.topics]
    nxt = r.next_cursor
    return page, None if nxt is None else (nxt.topic_name, nxt.partition_index)


def test_describe_topic_partitions_pages(conn: Connection) -> None:
    _create(conn)
    named = ["dtp-c", "nope", "dtp-a", "bad name!", "dtp-b", "dtp-a"]
    # Name order, each topic once; unknown names answer 3, illegal ones 17, and take no room.
    assert _dtp(conn, named) == ([("bad name!", 17, []), ("dtp-a", 0, [0, 1, 2]), ("dtp-b", 0, [0, 1]),
                                  ("dtp-c", 0, [0]), ("nope", 3, [])], None)
    assert _dtp(conn, named, 2) == ([("bad name!", 17, []), ("dtp-a", 0, [0, 1])], ("dtp-a", 2))
    # The limit reached exactly at a topic's end: the cursor names the next topic.
    assert _dtp(conn, named, 3) == ([("bad name!", 17, []), ("dtp-a", 0, [0, 1, 2])], ("dtp-b", 0))
    assert _dtp(conn, named, 3, ("dtp-b", 1)) == ([("dtp-b", 0, [1]), ("dtp-c", 0, [0]), ("nope", 3, [])], None)
    assert _dtp(conn, named, 0) == _dtp(conn, named, 1) == ([("bad name!", 17, []), ("dtp-a", 0, [0])],
                                                            ("dtp-a", 1))
    # A cursor topic missing from the names, or a negative partition: every named topic is INVALID_REQUEST.
    assert _dtp(conn, ["dtp-a", "nope"], 3, ("dtp-b", 0)) == ([("dtp-a", 42, []), ("nope", 42, [])], None)
    assert _dtp(conn, ["dtp-a"], 3, ("dtp-a", -1)) == ([("dtp-a", 42, [])], None)
    # Every topic (no names): walk all pages of one partition each.
    seen: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(20):
        page, cursor = _dtp(conn, [], 1, cursor)
        seen += [(name, i) for name, _, indexes in page for i in indexes]
        if cursor is None:
            break
    assert seen == [(name, i) for name in sorted(TOPICS) for i in range(TOPICS[name])]


def test_describe_topic_partitions_partition_fields(conn: Connection) -> None:
    _create(conn)
    r = conn.request(75, {"topics": [{"name": "dtp-c"}]}, version=0)
    (t,) = r.topics
    topic_id = conn.request(3, {"topics": [{"name": "dtp-c"}], "allow_auto_topic_creation": False},
                            version=12).topics[0].topic_id
    assert (t.topic_id, t.is_internal, t.topic_authorized_operations) == (topic_id, False, 3576)
    (p,) = t.partitions
    assert (p.leader_id, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr,
            p.offline_replicas) == (1, (1,), (1,), (), (), ())


def _lcr(conn: Connection, types: list[int], version: int = 1) -> tuple[int, list[Any]]:
    r = conn.request(74, {"resource_types": types}, version=version)
    return r.error_code.value, [(x.resource_name, getattr(x, "resource_type", None)) for x in r.config_resources]


def test_list_config_resources(conn: Connection) -> None:
    _create(conn)
    assert _lcr(conn, [], 0) == (0, [])  # v0: client metrics resources only
    code, resources = _lcr(conn, [])
    assert code == 0 and resources[:2] == [("1", 8), ("1", 4)]  # brokers' loggers, brokers, then topics
    assert sorted(resources[2:]) == [(name, 2) for name in sorted(TOPICS)]
    assert _lcr(conn, [4]) == (0, [("1", 4)])
    assert _lcr(conn, [16]) == _lcr(conn, [32]) == (0, [])
    assert _lcr(conn, [2, 99]) == (35, [])  # UNSUPPORTED_VERSION for a type the API does not list
