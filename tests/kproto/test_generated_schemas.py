"""The schemas kio's generator made from Kafka 4.4.0's JSON (samsa.kproto.schema) are kio classes
that match that JSON: every field Kafka's schema has at that version, in its order, and nothing
else; and kio's reader reads back what its writer wrote.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib
import re
import types
import typing
import zipfile
from pkgutil import resolve_name
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from samsa.kproto.messages import API_KEYS, request_class, response_class
from samsa.kproto.schema import COORDINATOR_RECORDS, EXTRA_API_KEYS, EXTRA_SCHEMAS

st.register_type_strategy(Records, st.binary(max_size=30).map(Records))

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENTS_JAR = ROOT / "compat-tests" / "oracle" / "lib" / "kafka-clients-4.4.0.jar"
COORDINATOR_JAR = ROOT / "compat-tests" / "oracle" / "lib" / "kafka-group-coordinator-4.4.0.jar"

CASES = [(name, version) for name, versions in sorted(EXTRA_SCHEMAS.items()) for version in sorted(versions)]
CLASSES = [
    cls
    for name, version in CASES
    for cls in (request_class(API_KEYS[name], version), response_class(API_KEYS[name], version))
]
RECORDS = [(record_type, resolve_name(path)) for record_type, paths in sorted(COORDINATOR_RECORDS.items())
           for path in paths]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _kafka_json(message: str, jar_path: pathlib.Path = CLIENTS_JAR) -> dict[str, Any]:
    if not jar_path.exists():
        pytest.skip(f"{jar_path.name} is installed by `make compat-deps`")
    with zipfile.ZipFile(jar_path) as jar:
        text = jar.read(f"common/message/{message}.json").decode()
    return dict(json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)))


def _in_range(spec: str, version: int) -> bool:
    if spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _inner_class(hint: Any) -> Any:
    """The dataclass inside X, X | None, tuple[X, ...] or tuple[X, ...] | None."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return _inner_class(next(a for a in args if a is not type(None)))
    if typing.get_origin(hint) is tuple:
        return _inner_class(args[0])
    return hint


def _compare(cls: Any, fields: list[dict[str, Any]], common: dict[str, Any], version: int, path: str) -> None:
    expected = [f for f in fields if _in_range(f.get("versions", f.get("taggedVersions", "0+")), version)]
    ours = [f for f in dataclasses.fields(cls)]
    names = [f.name for f in ours]
    wanted = [_snake(f["name"]) for f in expected]
    # kio drops the "Ms" suffix of time fields it types as timedelta/datetime.
    assert [n if n in names else n.removesuffix("_ms") for n in wanted] == names, path
    hints = typing.get_type_hints(cls)
    for ours_field, kafka_field in zip(ours, expected, strict=True):
        nested = kafka_field.get("fields")
        type_name = kafka_field["type"].removeprefix("[]")
        if nested is None and type_name in common:
            nested = common[type_name]["fields"]
        if nested is not None:
            _compare(_inner_class(hints[ours_field.name]), nested, common, version, f"{path}.{ours_field.name}")


@pytest.mark.parametrize(("name", "version"), CASES)
def test_generated_schema_matches_kafka_json(name: str, version: int) -> None:
    for kind, cls in (("Request", request_class(API_KEYS[name], version)),
                      ("Response", response_class(API_KEYS[name], version))):
        schema = _kafka_json(_camel(name) + kind)
        assert schema["apiKey"] == API_KEYS[name] == cls.__api_key__
        assert cls.__version__ == version
        assert _in_range(schema["validVersions"], version)
        assert cls.__flexible__ == _in_range(schema["flexibleVersions"], version)
        common = {s["name"]: s for s in schema.get("commonStructs", [])}
        _compare(cls, schema["fields"], common, version, cls.__name__)


@pytest.mark.parametrize(("record_type", "cls"), RECORDS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_streams_group_records_match_kafka_json(record_type: int, cls: Any) -> None:
    schema = _kafka_json(cls.__name__, COORDINATOR_JAR)
    assert schema["type"] in ("coordinator-key", "coordinator-value")
    assert schema["apiKey"] == record_type
    assert cls.__flexible__ == _in_range(schema["flexibleVersions"], 0)
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    _compare(cls, schema["fields"], common, 0, cls.__name__)


def test_new_api_keys_are_named_as_kafka_names_them() -> None:
    for key, name in EXTRA_API_KEYS.items():
        assert _kafka_json(_camel(name) + "Request")["apiKey"] == key


@pytest.mark.parametrize("cls", CLASSES + [cls for _, cls in RECORDS], ids=lambda c: f"{c.__name__}-v{c.__version__}")
def test_kio_reads_back_what_it_wrote(cls: type[Any]) -> None:
    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.generate])
    @given(st.from_type(cls))
    def check(value: object) -> None:
        out = io.BytesIO()
        entity_writer(cls)(out, value)
        data = out.getvalue()
        decoded, size = entity_reader(cls)(data, 0)
        assert (decoded, size) == (value, len(data))

    check()


def test_every_generated_package_is_installed() -> None:
    # pyproject.toml lists packages one by one; a missing one would work editable and fail from a wheel.
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        "samsa.kproto." + ".".join(init.parent.relative_to(ROOT / "kproto").parts)
        for init in (ROOT / "kproto" / "schema").rglob("__init__.py")
    }
    assert on_disk - listed == set()
