"""KIP-853 with real processes: a 4th controller joins the three voters as an observer, is added with
AddRaftVoter, the leader is removed with RemoveRaftVoter (it resigns), topics keep being created, and after
a restart of every node the voter set is the one in the log, not controller.quorum.voters."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import HOST, Cluster, unique, wait_for

from samsa.broker import launcher
from samsa.broker.client import Connection, KafkaClientError
from samsa.kproto.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2]


class Fourth:
    """Node 4 (broker and controller), formed with the same controller.quorum.voters: an observer."""

    def __init__(self, cluster: Cluster, directory: Path) -> None:
        self.port, self.controller_port = launcher.free_ports(2)
        self.options = launcher.ServeOptions(
            data_dir=directory / "node-4", port=self.port, host=HOST, node_id=4, roles="broker,controller",
            controller_quorum=cluster.plan.quorum, controller_listen=f"{HOST}:{self.controller_port}",
            overrides=cluster.plan.overrides)  # the cluster's own settings
        self.log = directory / "node-4.log"
        self.served: launcher.ServeProcess | None = None

    def start(self) -> None:
        self.served = launcher.start_serve(self.options, self.log, cwd=REPO)
        self.served.wait_listening()

    def stop(self, *, kill: bool = False) -> None:
        if self.served is not None:
            self.served.stop(10, kill=kill)
            self.served = None

    @property
    def directory_id(self) -> uuid.UUID:
        return _directory_id(self.options.data_dir)


def _directory_id(data_dir: Path) -> uuid.UUID:
    props = dict(line.split("=", 1) for line in (data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    return uuid.UUID(bytes=base64.urlsafe_b64decode(props["directory.id"] + "=="))


@pytest.fixture
def fourth(cluster: Cluster, tmp_path: Path) -> Iterator[Fourth]:
    node = Fourth(cluster, tmp_path)
    node.start()
    try:
        yield node
    finally:
        if node.served is not None:
            print(node.served.log_tail(60))
        node.stop()


def _ask(port: int, api_key: int, values: dict[str, Any]) -> Any:
    try:
        with Connection(HOST, port, client_id="kip853-test", timeout_s=40) as conn:
            return conn.request(api_key, values, version=0 if api_key == 81 else 1)
    except (OSError, KafkaClientError):
        return None


def _add(port: int, voter_id: int, directory_id: uuid.UUID, controller_port: int) -> Any:
    return _ask(port, 80, {"cluster_id": None, "timeout": 30_000, "voter_id": voter_id,
                           "voter_directory_id": directory_id,
                           "listeners": [{"name": "CONTROLLER", "host": HOST, "port": controller_port}]})


def _remove(port: int, voter_id: int, directory_id: uuid.UUID) -> Any:
    return _ask(port, 81, {"cluster_id": None, "voter_id": voter_id, "voter_directory_id": directory_id})


def _update_kraft_version(port: int, validate_only: bool = False) -> Any:
    """UpdateFeatures kraft.version=1 (UPGRADE), as `kafka-features.sh upgrade --feature kraft.version=1` sends it."""
    try:
        with Connection(HOST, port, client_id="kip853-test", timeout_s=40) as conn:
            return conn.request(57, {"timeout": 30_000, "validate_only": validate_only, "feature_updates": [
                {"feature": "kraft.version", "max_version_level": 1, "upgrade_type": 1}]}, version=1)
    except (OSError, KafkaClientError):
        return None


def _finalized_kraft_version(port: int) -> int | None:
    with Connection(HOST, port, client_id="kip853-test", timeout_s=20) as conn:
        r = conn.request(18, {"client_software_name": "t", "client_software_version": "1"}, version=4)
    return next((int(f.max_version_level) for f in r.finalized_features if f.name == "kraft.version"), None)


def _upgrade(cluster: Cluster) -> None:
    """A cluster formed with controller.quorum.voters runs kraft.version 0 (Kafka's static quorum): voters can
    change only after the upgrade, which the leader accepts once it has heard from every voter."""
    wait_for("kraft.version 1", lambda: ((r := _update_kraft_version(cluster.port(1))) is not None
                                         and r.error_code == ErrorCode.none) or None, 60)


def _created(cluster: Cluster, port: int, topic: str) -> bool | None:
    try:
        with Connection(HOST, port, client_id="kip853-test", timeout_s=15) as conn:
            r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": -1,
                                              "assignments": (), "configs": ()}], "timeout": 10_000,
                                  "validate_only": False})
    except (OSError, KafkaClientError):
        return None
    return True if r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists) else None


def _voters(cluster: Cluster, asked: list[int]) -> set[int] | None:
    view = cluster.quorum_leader(asked)
    return None if view is None else set(view.voters)


@pytest.mark.timeout(300)
def _restart_all(cluster: Cluster, fourth: Fourth) -> None:
    """Stop the three nodes and the fourth controller, start them all again, and wait until each listens."""
    fourth.stop()
    cluster.stop()
    for n in cluster.node_ids:
        cluster.start(n, wait=False)
    fourth.served = launcher.start_serve(fourth.options, fourth.log, cwd=REPO)
    for n in cluster.node_ids:
        cluster.wait_listening(n)
    fourth.served.wait_listening()


def test_add_a_fourth_controller_remove_the_leader_and_restart(cluster: Cluster, fourth: Fourth) -> None:
    wait_for("node 4 among the observers",
             lambda: ((v := cluster.quorum_leader()) is not None and 4 in v.observers) or None, 30)
    # A static quorum (kraft.version 0) refuses voter changes as Kafka 4.4 does; then it is upgraded.
    static = _add(cluster.port(1), 4, fourth.directory_id, fourth.controller_port)
    assert static is not None and (static.error_code, static.error_message) == (
        ErrorCode.unsupported_version, "Cluster doesn't support adding voter because the kraft.version feature is 0")
    assert _finalized_kraft_version(cluster.port(1)) is None
    _upgrade(cluster)
    assert all(wait_for(f"node {n} at kraft.version 1", lambda n=n: _finalized_kraft_version(cluster.port(n)) == 1
                        or None, 30)[0] for n in cluster.node_ids)

    # Refusals first, with Kafka's codes: a voter id that is taken, an unknown replica key.
    dup = _add(cluster.port(1), 2, uuid.uuid4(), fourth.controller_port)
    assert dup is not None and dup.error_code == ErrorCode.duplicate_voter, dup
    unknown = _remove(cluster.port(1), 3, uuid.uuid4())
    assert unknown is not None and unknown.error_code == ErrorCode.voter_not_found, unknown

    # The add, sent to a broker listener (forwarded to the active controller); an observer that has not
    # caught up yet is refused REQUEST_TIMED_OUT, and asked again.
    def added() -> bool | None:
        r = _add(cluster.port(1), 4, fourth.directory_id, fourth.controller_port)
        if r is not None and r.error_code != ErrorCode.none:
            print("AddRaftVoter:", r.error_code, r.error_message)
        return True if r is not None and r.error_code == ErrorCode.none else None

    wait_for("node 4 added", added, 60)
    assert wait_for("4 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3, 4} or None, 20)[0]

    # UpdateRaftVoter (a voter telling the leader its listeners), on the leader's controller listener.
    view = wait_for("a leader", cluster.quorum_leader, 20)[0]
    controller_port = cluster.plan.node(view.leader_id).controller_port

    def update(epoch: int) -> Any:
        with Connection(HOST, controller_port, client_id="kip853-test", timeout_s=20) as conn:
            return conn.request(82, {"cluster_id": None, "current_leader_epoch": epoch, "voter_id": 4,
                                     "voter_directory_id": fourth.directory_id,
                                     "listeners": [{"name": "CONTROLLER", "host": HOST,
                                                    "port": fourth.controller_port}],
                                     "k_raft_version_feature": {"min_supported_version": 0,
                                                                "max_supported_version": 1}}, version=0)

    stale = update(view.leader_epoch - 1)
    assert stale.error_code == ErrorCode.fenced_leader_epoch
    updated = update(view.leader_epoch)
    assert updated.error_code == ErrorCode.none, updated
    assert (updated.current_leader.leader_id, updated.current_leader.port) == (view.leader_id, controller_port)

    # Remove the leader: the change commits, it resigns, and the others elect a new one.
    # (The update above answered at its append: until it commits, a change is refused REQUEST_TIMED_OUT.)
    leader = wait_for("a leader", cluster.quorum_leader, 20)[0].leader_id

    def removed() -> Any:
        r = _remove(cluster.port(leader), leader, _directory_id(cluster.plan.node(leader).data_dir))
        # REQUEST_TIMED_OUT: refused while a change is uncommitted, or appended but not committed in time (then
        # the next try finds it gone: VOTER_NOT_FOUND; the voter set is checked below either way).
        assert r is None or r.error_code in (ErrorCode.none, ErrorCode.request_timed_out, ErrorCode.voter_not_found), r
        return r if r is not None and r.error_code in (ErrorCode.none, ErrorCode.voter_not_found) else None

    wait_for("the leader removed", removed, 30)
    remaining = {1, 2, 3, 4} - {leader}
    view = wait_for("a new leader among the remaining voters",
                    lambda: ((v := cluster.quorum_leader([n for n in (1, 2, 3) if n != leader])) is not None
                             and v.leader_id in remaining and set(v.voters) == remaining and v) or None, 60)[0]
    assert leader in view.observers or leader not in view.voters

    # The cluster keeps working: topics created through node 4 and through the old leader.
    wait_for("a topic created through node 4", lambda: _created(cluster, fourth.port, unique("via4")), 60)
    wait_for("a topic created through the removed node",
             lambda: _created(cluster, cluster.port(leader), unique("viaold")), 60)

    # Restart everything: the voter set comes from the log, not from controller.quorum.voters.
    _restart_all(cluster, fourth)
    assert wait_for("the voters after the restart",
                    lambda: _voters(cluster, [n for n in (1, 2, 3) if n != leader]) == remaining or None, 60)[0]
    wait_for("a topic created after the restart", lambda: _created(cluster, fourth.port, unique("after")), 60)


def _quorum_tool(bootstrap: str, *args: str, check: bool = True) -> Any:
    sys.path.insert(0, str(REPO / "compat-tests"))
    import oracle_fixture

    result = oracle_fixture.run_kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server",
                                           bootstrap, *args, jvm_opts=oracle_fixture.QUICK_JVM_OPTS, timeout=90,
                                           check=check)
    print(result.stdout, result.stderr[-2000:])
    return result


def _kafka_tools_installed() -> bool:
    sys.path.insert(0, str(REPO / "compat-tests"))
    import oracle_fixture

    try:
        oracle_fixture.ensure_installed()
    except oracle_fixture.OracleError:
        return False
    return True


@pytest.mark.timeout(300)
def test_kafka_metadata_quorum_tool_adds_and_removes_a_samsa_controller(cluster: Cluster, fourth: Fourth,
                                                                        tmp_path: Path) -> None:
    if not _kafka_tools_installed():
        pytest.skip("Kafka's tools are not installed (make compat-deps)")
    wait_for("node 4 among the observers",
             lambda: ((v := cluster.quorum_leader()) is not None and 4 in v.observers) or None, 30)
    _upgrade(cluster)
    # The new controller's own configuration, as Kafka's tool reads it: id, roles, listeners, log dir.
    config = tmp_path / "controller-4.properties"
    config.write_text("node.id=4\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n"
                      f"listeners=PLAINTEXT://{HOST}:{fourth.port},CONTROLLER://{HOST}:{fourth.controller_port}\n"
                      f"log.dirs={fourth.options.data_dir}\n")
    bootstrap = f"{HOST}:{cluster.port(1)}"
    directory = base64.urlsafe_b64encode(fourth.directory_id.bytes).decode().rstrip("=")

    def added() -> bool | None:
        result = _quorum_tool(bootstrap, "--command-config", str(config), "add-controller", check=False)
        return True if result.returncode == 0 else None

    out = wait_for("kafka-metadata-quorum add-controller", added, 120)
    assert out[0]
    assert wait_for("4 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3, 4} or None, 20)[0]
    status = _quorum_tool(bootstrap, "describe", "--status").stdout
    voters = json.loads(next(line.split(":", 1)[1] for line in status.splitlines() if line.startswith("CurrentVoters")))
    assert {v["id"]: v["directoryId"] for v in voters}[4] == directory
    assert {v["id"]: v["endpoints"] for v in voters}[4] == [f"CONTROLLER://{HOST}:{fourth.controller_port}"]

    # (the = form: a Kafka id may start with "-", which argparse would take for an option)
    result = _quorum_tool(bootstrap, "remove-controller", "--controller-id", "4",
                          f"--controller-directory-id={directory}")
    assert f"Removed KRaft controller 4 with directory id {directory}" in result.stdout
    assert wait_for("3 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3} or None, 20)[0]



@pytest.mark.timeout(200)
def test_kafka_metadata_quorum_tool_with_bootstrap_controller(cluster: Cluster, fourth: Fourth) -> None:
    """--bootstrap-controller: the admin client asks a controller listener DescribeCluster (KIP-919) for the
    controllers and the active one, then sends DescribeQuorum and the voter changes there."""
    if not _kafka_tools_installed():
        pytest.skip("Kafka's tools are not installed (make compat-deps)")
    sys.path.insert(0, str(REPO / "compat-tests"))
    import oracle_fixture

    wait_for("node 4 among the observers",
             lambda: ((v := cluster.quorum_leader()) is not None and 4 in v.observers) or None, 30)
    _upgrade(cluster)
    controller = f"{HOST}:{cluster.plan.node(1).controller_port}"
    directory = base64.urlsafe_b64encode(fourth.directory_id.bytes).decode().rstrip("=")

    def tool(*args: str) -> Any:
        result = oracle_fixture.run_kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand",
                                               "--bootstrap-controller", controller, *args,
                                               jvm_opts=oracle_fixture.QUICK_JVM_OPTS, timeout=90, check=False)
        print(result.stdout, result.stderr[-2000:])
        return result

    status = tool("describe", "--status")
    assert status.returncode == 0
    observers = json.loads(next(line.split(":", 1)[1] for line in status.stdout.splitlines()
                                if line.startswith("CurrentObservers")))
    assert 4 in [o["id"] for o in observers]
    # Removing a controller that is not a voter: Kafka's VOTER_NOT_FOUND, as the tool reports it.
    refused = tool("remove-controller", "--controller-id", "4", f"--controller-directory-id={directory}")
    assert refused.returncode != 0 and "VoterNotFoundException" in refused.stdout + refused.stderr


def _samsa(*args: str) -> Any:
    result = subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=90, stdin=subprocess.DEVNULL)
    print(result.stdout, result.stderr)
    return result


@pytest.mark.timeout(200)
def test_samsa_cluster_add_and_remove_controller(cluster: Cluster, fourth: Fourth) -> None:
    wait_for("node 4 among the observers",
             lambda: ((v := cluster.quorum_leader()) is not None and 4 in v.observers) or None, 30)
    _upgrade(cluster)
    bootstrap = ("-b", f"{HOST}:{cluster.port(2)}")
    endpoint = f"{HOST}:{fourth.controller_port}"
    directory = base64.urlsafe_b64encode(fourth.directory_id.bytes).decode().rstrip("=")

    def added() -> bool | None:
        result = _samsa("cluster", "add-controller", "--controller-id", "4", "--controller-data-dir",
                        str(fourth.options.data_dir), "--controller-endpoint", endpoint, *bootstrap)
        return True if result.returncode == 0 else None

    wait_for("samsa cluster add-controller", added, 60)
    assert wait_for("4 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3, 4} or None, 20)[0]
    again = _samsa("cluster", "add-controller", "--controller-id", "4", f"--controller-directory-id={directory}",
                   "--controller-endpoint", endpoint, *bootstrap)
    assert again.returncode == 1 and "DUPLICATE_VOTER" in again.stderr
    gone = _samsa("cluster", "remove-controller", "--controller-id", "4", f"--controller-directory-id={directory}",
                  *bootstrap)
    assert gone.returncode == 0 and f"Removed KRaft controller 4 with directory id {directory}" in gone.stdout
    assert wait_for("3 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3} or None, 20)[0]
    bad = _samsa("cluster", "remove-controller", "--controller-id", "4", "--controller-directory-id=nope",
                 *bootstrap)
    assert bad.returncode == 1 and "--controller-directory-id" in bad.stderr

    # AddRaftVoter v1 with ack_when_committed=false (KIP-1186) on the leader's controller listener: answered at
    # the append; the set shows the new voter once the record is committed.
    def added_unacknowledged() -> bool | None:
        view = cluster.quorum_leader()
        if view is None:
            return None
        port = cluster.plan.node(view.leader_id).controller_port
        r = _ask(port, 80, {"cluster_id": None, "timeout": 30_000, "voter_id": 4,
                            "voter_directory_id": fourth.directory_id, "ack_when_committed": False,
                            "listeners": [{"name": "CONTROLLER", "host": HOST, "port": fourth.controller_port}]})
        return True if r is not None and r.error_code == ErrorCode.none else None

    wait_for("node 4 added without waiting for the commit", added_unacknowledged, 60)
    assert wait_for("4 voters", lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3, 4} or None, 20)[0]


@pytest.mark.timeout(300)
def test_the_voter_set_survives_in_snapshots(cluster_factory: Any, tmp_path: Path) -> None:
    """Snapshots every 5 entries: the VotersRecord falls below every node's log start, so after a restart the
    voter set can only come from the snapshot (which carries it, framed before the image)."""
    from samsa.broker.metadata.raft_disk import latest_snapshot
    from samsa.raft.voter_set import VoterSet

    cluster = cluster_factory(3, overrides=("samsa.metadata.snapshot.interval.entries=5",))
    fourth = Fourth(cluster, tmp_path)
    fourth.start()
    try:
        wait_for("node 4 among the observers",
                 lambda: ((v := cluster.quorum_leader()) is not None and 4 in v.observers) or None, 30)
        _upgrade(cluster)
        wait_for("node 4 added", lambda: ((r := _add(cluster.port(1), 4, fourth.directory_id,
                                                     fourth.controller_port)) is not None
                 and r.error_code == ErrorCode.none) or None, 60)
        for i in range(8):
            wait_for(f"topic {i}", lambda i=i: _created(cluster, cluster.port(1), f"snap-{i}"), 30)
        metadata_dirs = [cluster.plan.node(n).data_dir / "__cluster_metadata-0" for n in cluster.node_ids]
        metadata_dirs.append(fourth.options.data_dir / "__cluster_metadata-0")

        def snapshots_hold_the_set() -> bool | None:
            for d in metadata_dirs:
                snapshot = latest_snapshot(d)
                if snapshot is None or not snapshot.voters or VoterSet.decode(snapshot.voters).ids != {1, 2, 3, 4}:
                    return None
            return True

        wait_for("every node's snapshot holding the 4 voters", snapshots_hold_the_set, 30)
        _restart_all(cluster, fourth)
        assert wait_for("4 voters after the restart",
                        lambda: _voters(cluster, [1, 2, 3]) == {1, 2, 3, 4} or None, 60)[0]
        wait_for("a topic created after the restart", lambda: _created(cluster, fourth.port, "snap-after"), 60)
    finally:
        fourth.stop()


@pytest.mark.timeout(400)
def test_the_kraft_version_upgrade_waits_for_a_voter_the_leader_never_saw(cluster: Cluster) -> None:
    """Kafka 4.4 upgrades a static quorum (kafka-features.sh upgrade --feature kraft.version=1) only once the
    leader knows every voter's directory id and kraft.version range: a voter down while the leader is elected
    holds it back (INVALID_UPDATE_VERSION). Once back, the upgrade writes the first VotersRecord with every
    directory id, and every node lists kraft.version 1 in ApiVersions. (An older Samsa wrote that record with
    its first voter change, possibly without a down voter's directory id: tests/raft covers that log.)"""
    view = wait_for("a leader", cluster.quorum_leader, 30)[0]
    absent = next(n for n in cluster.node_ids if n != view.leader_id)
    others = [n for n in cluster.node_ids if n != absent]
    # The absent voter goes down; then the leader is restarted, so the next leader (elected by the two others)
    # has never had a fetch from it.
    cluster.kill(absent)
    cluster.kill(view.leader_id)
    cluster.start(view.leader_id, wait=False)
    cluster.wait_listening(view.leader_id)
    wait_for("a leader among the two others", lambda: cluster.quorum_leader(others), 60)

    def refused() -> Any:
        r = _update_kraft_version(cluster.port(others[0]))
        return r if r is not None and r.error_code == ErrorCode.invalid_update_version else None

    r = wait_for("the upgrade refused while a voter was never heard from", refused, 60)[0]
    assert r.error_message == ("The update failed for all features since the following feature had an error: "
                               "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters "
                               "support it"), r.error_message
    remove = _remove(cluster.port(others[0]), absent, _directory_id(cluster.plan.node(absent).data_dir))
    assert remove is not None and (remove.error_code, remove.error_message) == (
        ErrorCode.unsupported_version, "Cluster doesn't support removing voter because the kraft.version feature is 0")

    cluster.start(absent)  # returns once it caught up (its broker listener opens then)
    wait_for("kraft.version 1", lambda: ((r := _update_kraft_version(cluster.port(others[0]))) is not None
                                         and r.error_code == ErrorCode.none) or None, 60)
    for n in cluster.node_ids:
        wait_for(f"node {n} at kraft.version 1", lambda n=n: _finalized_kraft_version(cluster.port(n)) == 1 or None, 30)
    expected = {n: base64.urlsafe_b64encode(_directory_id(cluster.plan.node(n).data_dir).bytes).decode().rstrip("=")
                for n in cluster.node_ids}
    if _kafka_tools_installed():
        status = _quorum_tool(f"{HOST}:{cluster.port(others[0])}", "describe", "--status").stdout
        voters = json.loads(next(line.split(":", 1)[1] for line in status.splitlines()
                                 if line.startswith("CurrentVoters")))
        assert {v["id"]: v["directoryId"] for v in voters} == expected
