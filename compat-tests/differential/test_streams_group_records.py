"""The streams-group records Kafka 4.4.0 and Samsa write to __consumer_offsets for the same life of a streams
group (the `streams_group_heartbeat` scenario of kip1071.py: a member joins, a second one splits the tasks with
revocation first, both leave, the group is deleted), as Kafka's own DumpLogSegments --offsets-decoder prints
them: the same records in the same order with the same fields, but the metadata hash (of topic ids, which
differ) and the assignment timestamps."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from oracle_fixture import run_kafka_tool

from differential import kip1071
from differential.framework import context
from samsa.broker.group.records import partition_for_group

pytestmark = [pytest.mark.differential, pytest.mark.kafka, pytest.mark.samsa]

NAME = "streams_group_records"  # the scenario's topics and group get this name, apart from its other runs
GROUP = f"diff-{NAME.replace('_', '-')}-app"
_RECORD = re.compile(r"key: (\{.*?\}\}) payload: (.*)$")


def _streams_records(data_dir: Path) -> list[str]:
    """Type, member and value of the group's streams records (types 17..23), in log order, with the metadata hash
    and the assignment timestamp masked."""
    out = []
    for segment in sorted((data_dir / f"__consumer_offsets-{partition_for_group(GROUP, 50)}").glob("*.log")):
        text = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files",
                              str(segment), timeout=300).stdout
        for line in text.splitlines():
            m = _RECORD.search(line)
            if m is None:
                continue
            key = json.loads(m.group(1))
            if int(key["type"]) < 17 or key["data"]["groupId"] != GROUP:
                continue
            payload = re.sub(r'"metadataHash":-?\d+', '"metadataHash":H', m.group(2))
            payload = re.sub(r'"assignmentTimestamp":\d+', '"assignmentTimestamp":T', payload)
            out.append(f'{key["type"]} {key["data"].get("memberId", "")} {payload}')
    return out


def test_samsa_writes_the_streams_group_records_kafka_writes(kafka_oracle: Any, samsa_server: Any) -> None:
    t0 = int(time.time() * 1000)
    for target, bootstrap in (("samsa", samsa_server.bootstrap), ("kafka", kafka_oracle.bootstrap)):
        with context(target, bootstrap, NAME, t0) as ctx:
            kip1071.streams_group_heartbeat(ctx)
    kafka = _streams_records(kafka_oracle.nodes[0].data_dir)
    samsa = _streams_records(samsa_server.data_dir)
    assert len(kafka) > 20 and {r.split(" ")[0] for r in kafka} == {"17", "19", "20", "21", "22", "23"}
    assert samsa == kafka
