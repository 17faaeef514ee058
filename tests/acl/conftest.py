from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.broker import Broker
from tests.acl.harness import acl_broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = acl_broker(tmp_path)
    yield b
    b.close()
