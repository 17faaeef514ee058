"""Building kio response entities of any version from plain values, and reading request fields.

kio generates one frozen dataclass per message *version*, with nested classes per version too.
Handlers describe a response once, as nested dicts under the newest field names, and `build`
turns that into the exact class of the version being answered: fields the version lacks are
dropped, fields it needs but the handler left out get Kafka's zero value, and plain Python values
(milliseconds, error-code ints, UUIDs) are converted to the types kio's writers expect.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from samsa.kproto.errors import NewerErrorCode

T = TypeVar("T")

_UTC = datetime.UTC


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nested: type | None  # entity class of a nested struct or of array items
    is_array: bool
    optional: bool
    has_default: bool


@cache
def _plan(cls: Any) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        optional = False
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            optional = len(args) < len(typing.get_args(hint))
            hint = args[0]
            origin = typing.get_origin(hint)
        nested: type | None = None
        is_array = False
        if origin is tuple:
            is_array = True
            item = typing.get_args(hint)[0]
            if dataclasses.is_dataclass(item):
                nested = item  # type: ignore[assignment]
        elif dataclasses.is_dataclass(hint):
            nested = hint  # type: ignore[assignment]
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        plans.append(
            _FieldPlan(f.name, f.metadata.get("kafka_type"), nested, is_array, optional, has_default)
        )
    return tuple(plans)


def _zero(plan: _FieldPlan) -> Any:
    if plan.is_array:
        return ()
    if plan.optional and plan.kafka_type not in ("timedelta_i32", "timedelta_i64"):
        return None
    if plan.nested is not None:
        return build(plan.nested, {})
    match plan.kafka_type:
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "float64":
            return 0.0
        case "error_code":
            return ErrorCode.none
        case "uuid":
            return None
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(0)
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(0, _UTC)
        case _:
            return 0


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    if plan.is_array:
        if plan.nested is not None:
            return tuple(v if isinstance(v, plan.nested) else build(plan.nested, v) for v in value)
        return tuple(value)
    if plan.nested is not None:
        return value if isinstance(value, plan.nested) else build(plan.nested, value)
    match plan.kafka_type:
        case "error_code":
            if isinstance(value, ErrorCode):
                return value
            return ErrorCode(int(value)) if int(value) in ErrorCode._value2member_map_ else NewerErrorCode(value)
        case "timedelta_i32" | "timedelta_i64":
            if isinstance(value, datetime.timedelta):
                return value
            return datetime.timedelta(milliseconds=int(value))
        case "datetime_i64":
            if isinstance(value, datetime.datetime):
                return value
            if int(value) < 0 and plan.optional:
                return None
            return datetime.datetime.fromtimestamp(int(value) / 1000, _UTC)
        case "uuid":
            if isinstance(value, uuid.UUID):
                return value
            return uuid.UUID(str(value))
    return value


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """Construct `cls` (a kio entity of some version) from `values`, adapting to the version."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(typing.cast(Any, cls)):
        if plan.name in values:
            kwargs[plan.name] = _convert(plan, values[plan.name])
        elif not plan.has_default:
            kwargs[plan.name] = _zero(plan)
    return cls(**kwargs)


def ms(value: datetime.timedelta | int | None, default: int = 0) -> int:
    """Milliseconds from a kio timedelta field (or a plain int)."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def field(entity: object, name: str, default: Any = None) -> Any:
    """A request field that only some versions carry."""
    return getattr(entity, name, default)
