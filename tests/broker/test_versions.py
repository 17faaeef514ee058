"""Every advertised (API, version) answers a well-formed request with a decodable response.

ApiVersions must never advertise what does not work: this walks the whole advertised table.
"""

from __future__ import annotations

import time
from typing import Any

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

TOPIC = "versions"


def _requests(topic_id: Any) -> dict[int, dict[str, Any]]:
    batch = encode_batch([(b"k", b"v", ())], timestamp_ms=int(time.time() * 1000))
    fetch_partitions = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]
    return {
        0: {"transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]},
        1: {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "replica_id": -1,
            "topics": [{"topic": TOPIC, "topic_id": topic_id, "partitions": fetch_partitions}],
            "forgotten_topics_data": (), "rack_id": ""},
        2: {"replica_id": -1, "isolation_level": 0, "timeout": 1000,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        3: {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": True, "include_cluster_authorized_operations": True},
        18: {"client_software_name": "t", "client_software_version": "1"},
        19: {"topics": [{"name": "made-by-versions", "num_partitions": 1, "replication_factor": 1,
                         "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": True},
        20: {"topics": [{"name": "no-such-topic"}], "topic_names": ["no-such-topic"], "timeout": 1000},
        21: {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout": 1000},
        23: {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        32: {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}],
             "include_synonyms": True, "include_documentation": True},
        33: {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": ()}], "validate_only": True},
        37: {"topics": [{"name": TOPIC, "count": 1, "assignments": None}], "timeout": 1000, "validate_only": True},
        44: {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": ()}], "validate_only": True},
        60: {"include_cluster_authorized_operations": True},
        74: {"resource_types": ()},
        75: {"topics": [{"name": TOPIC}], "response_partition_limit": 10},
    }


def test_every_advertised_version_answers(conn: Connection) -> None:
    r = conn.request(19, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
    assert r.topics[0].error_code.value == 0
    topic_id = conn.request(3, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False}, version=12).topics[0].topic_id
    requests = _requests(topic_id)
    checked = 0
    for api_key, (low, high) in sorted(conn.versions.items()):
        if api_key not in requests:
            continue  # covered by its own feature tests (groups, ...)
        for version in range(low, high + 1):
            response = conn.request(api_key, requests[api_key], version=version)
            assert response is not None, (api_key, version)
            assert type(response).__version__ == version or api_key == 18
            checked += 1
    assert checked > 60
