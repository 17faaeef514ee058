"""The Java consumer (group.protocol=consumer) against Samsa: three members join, one is SIGKILLed, one leaves.

The killed member's partitions move to the others once group.consumer.session.timeout.ms (3 s here) expires;
the member that closes leaves with epoch -1 and the last member takes everything. Each member commits a
record (synchronously, with its member epoch) before it counts it, so a partition held by two members at once
shows as a record counted twice, and a partition that never moved as records never consumed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness848 import java_classes, java_member, join_kill_leave
from samsa_fixture import SamsaProcess


def test_java_members_join_one_killed_one_leaves_every_record_once(samsa_kip848: SamsaProcess,
                                                                     tmp_path: Path) -> None:
    if java_classes() is None:
        pytest.skip("javac or the kafka-clients jars are missing; run make compat-deps")
    join_kill_leave(samsa_kip848, tmp_path, java_member, "kip848-java-kill", "kip848-java-kill-group")
