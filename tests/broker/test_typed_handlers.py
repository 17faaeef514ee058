"""The typed handlers' request and response unions cover exactly the versions their module declares."""

from __future__ import annotations

import typing

import pytest

from samsa.broker.context import ApiSpec
from samsa.broker.handlers import describe_cluster, heartbeat, list_offsets, produce
from samsa.kproto.messages import request_class, response_class

TYPED = [
    (produce.API, produce.ProduceRequest, produce.ProduceResponse),
    (list_offsets.API, list_offsets.ListOffsetsRequest, list_offsets.ListOffsetsResponse),
    (heartbeat.API, heartbeat.HeartbeatRequest, heartbeat.HeartbeatResponse),
    (describe_cluster.API, describe_cluster.DescribeClusterRequest, describe_cluster.DescribeClusterResponse),
]


def _members(alias: object) -> set[type]:
    return set(typing.get_args(alias))


@pytest.mark.parametrize(("spec", "request_alias", "response_alias"), TYPED, ids=lambda v: str(getattr(v, "key", "")))
def test_unions_are_the_declared_versions_classes(spec: ApiSpec, request_alias: object, response_alias: object) -> None:
    versions = range(spec.min_version, spec.max_version + 1)
    assert _members(request_alias) == {request_class(spec.key, v) for v in versions}
    assert _members(response_alias) == {response_class(spec.key, v) for v in versions}


def test_produce_recognises_each_of_its_response_classes() -> None:
    assert set(produce._ResponseTypes) == _members(produce.ProduceResponse)
