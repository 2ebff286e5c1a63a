"""Typed payloads: a task's parameter annotations turned into checks and conversions.

A parameter annotated with a dataclass, a ``TypedDict``, an ``enum.Enum``, a ``datetime`` /
``date`` or a pydantic model (the optional dependency, imported only when such a model is
met) is *rich*: at enqueue its value is checked and converted to JSON (a dataclass to a
dict, an enum to its value, a datetime to ISO 8601 text, a model by ``model_dump(mode=
"json")``), and a worker hands the function the typed value back. Containers of them
(``list[X]``, ``dict[str, X]``, ``tuple[X, ...]``, ``X | None``) are rich too. Plain
annotations (``int``, ``str``, ``list[int]``, ...) are checked only with ``strict_types``.

Errors name the field: ``PayloadError("payload does not fit fetch(): url: expected str,
got int 123")``. docs/features/typed-payloads.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from durq.errors import PayloadError

_EMPTY = inspect.Parameter.empty


class TypeProblem(Exception):
    """A value that does not fit its annotation; ``path`` says where (``order.items[2]``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _got(value: Any) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown[:60]}"


def _is_model(tp: Any) -> bool:
    """A pydantic model class (pydantic is imported only if already loaded by the user)."""
    if not isinstance(tp, type) or "pydantic" not in sys.modules:
        return False
    base = getattr(sys.modules["pydantic"], "BaseModel", None)
    return base is not None and issubclass(tp, base)


def is_rich(tp: Any) -> bool:
    """Whether values of ``tp`` are converted (not only checked) between JSON and Python."""
    if isinstance(tp, type) and (
        dataclasses.is_dataclass(tp)
        or issubclass(tp, enum.Enum | dt.date)
        or is_typeddict(tp)
        or _is_model(tp)
    ):
        return True
    return any(is_rich(a) for a in get_args(tp) if a is not Ellipsis)


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return get_args(tp)
    return None


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # noqa: BLE001 - an unresolvable forward reference: leave it unchecked
        return {}


def to_json(value: Any, tp: Any, path: str) -> Any:
    """``value`` checked against ``tp`` and turned into its JSON form.

    Raises:
        TypeProblem: it does not fit.
    """
    return _convert(value, tp, path, outbound=True)


def from_json(value: Any, tp: Any, path: str) -> Any:
    """A JSON value turned into ``tp`` (a dataclass, enum member, datetime, model ...).

    Raises:
        TypeProblem: it does not fit.
    """
    return _convert(value, tp, path, outbound=False)


def _convert(value: Any, tp: Any, path: str, *, outbound: bool) -> Any:
    if tp is Any or tp is _EMPTY or tp is object:
        return value
    if tp is None or tp is type(None):
        if value is not None:
            raise TypeProblem(path, f"expected None, got {_got(value)}")
        return None
    union = _union_args(tp)
    if union is not None:
        problems = []
        for option in union:
            try:
                return _convert(value, option, path, outbound=outbound)
            except TypeProblem as exc:
                problems.append(str(exc).removeprefix(f"{path}: "))
        raise TypeProblem(path, " or ".join(dict.fromkeys(problems)))
    origin = get_origin(tp)
    if origin is Literal:
        if value not in get_args(tp):
            raise TypeProblem(path, f"expected one of {list(get_args(tp))}, got {_got(value)}")
        return value
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        if not isinstance(value, list | tuple) or (outbound is False and isinstance(value, str)):
            raise TypeProblem(path, f"expected a list, got {_got(value)}")
        args = get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise TypeProblem(path, f"expected {len(args)} items, got {len(value)}")
            items = [_convert(v, a, f"{path}[{i}]", outbound=outbound)
                     for i, (v, a) in enumerate(zip(value, args, strict=True))]  # fmt: skip
        else:
            item = args[0] if args else Any
            items = [
                _convert(v, item, f"{path}[{i}]", outbound=outbound) for i, v in enumerate(value)
            ]
        if outbound:
            return items
        return tuple(items) if origin is tuple or tp is tuple else items
    if origin is dict or tp is dict or origin is Mapping:
        if not isinstance(value, dict):
            raise TypeProblem(path, f"expected an object, got {_got(value)}")
        args = get_args(tp)
        item = args[1] if len(args) == 2 else Any
        return {k: _convert(v, item, f"{path}.{k}", outbound=outbound) for k, v in value.items()}
    if not isinstance(tp, type):
        return value  # a TypeVar, NewType, Annotated ...: not checked
    if _is_model(tp):
        return _model(value, tp, path, outbound=outbound)
    if dataclasses.is_dataclass(tp):
        return _dataclass(value, tp, path, outbound=outbound)
    if is_typeddict(tp):
        return _typeddict(value, tp, path, outbound=outbound)
    if issubclass(tp, enum.Enum):
        if isinstance(value, tp):
            return value.value if outbound else value
        try:
            member = tp(value)
        except (ValueError, TypeError):
            allowed = [m.value for m in tp]
            raise TypeProblem(path, f"expected one of {allowed}, got {_got(value)}") from None
        return member.value if outbound else member
    if issubclass(tp, dt.date):
        return _when(value, tp, path, outbound=outbound)
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeProblem(path, f"expected bool, got {_got(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeProblem(path, f"expected int, got {_got(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeProblem(path, f"expected float, got {_got(value)}")
        return value
    if not isinstance(value, tp):
        raise TypeProblem(path, f"expected {tp.__name__}, got {_got(value)}")
    return value


def _when(value: Any, tp: type, path: str, *, outbound: bool) -> Any:
    is_datetime = issubclass(tp, dt.datetime)
    fits = isinstance(value, dt.date) and isinstance(value, tp)
    if fits and (is_datetime or not isinstance(value, dt.datetime)):
        return value.isoformat() if outbound else value
    if isinstance(value, str):
        try:
            parsed = (dt.datetime if is_datetime else dt.date).fromisoformat(value)
        except ValueError:
            pass
        else:
            return value if outbound else parsed
    raise TypeProblem(path, f"expected {tp.__name__} (or ISO 8601 text), got {_got(value)}")


def _dataclass(value: Any, tp: type, path: str, *, outbound: bool) -> Any:
    hints = _hints(tp)
    fields = {f.name: f for f in dataclasses.fields(tp) if f.init}
    if isinstance(value, tp):
        data = {name: getattr(value, name) for name in fields}
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise TypeProblem(path, f"unknown field(s) {unknown} for {tp.__name__}")
        data = dict(value)
    else:
        raise TypeProblem(path, f"expected {tp.__name__} (or an object), got {_got(value)}")
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in data:
            raise TypeProblem(f"{path}.{name}", f"missing (required by {tp.__name__})")
    out = {
        name: _convert(v, hints.get(name, Any), f"{path}.{name}", outbound=outbound)
        for name, v in data.items()
    }
    return out if outbound else tp(**out)


def _typeddict(value: Any, tp: Any, path: str, *, outbound: bool) -> Any:
    if not isinstance(value, dict):
        raise TypeProblem(path, f"expected {tp.__name__} (an object), got {_got(value)}")
    hints = _hints(tp)
    unknown = sorted(set(value) - set(hints))
    if unknown:
        raise TypeProblem(path, f"unknown key(s) {unknown} for {tp.__name__}")
    for name in sorted(getattr(tp, "__required_keys__", ())):
        if name not in value:
            raise TypeProblem(f"{path}.{name}", f"missing (required by {tp.__name__})")
    return {k: _convert(v, hints[k], f"{path}.{k}", outbound=outbound) for k, v in value.items()}


def _model(value: Any, tp: Any, path: str, *, outbound: bool) -> Any:
    from pydantic import ValidationError

    try:
        model = value if isinstance(value, tp) else tp.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise TypeProblem(
            f"{path}.{where}" if where else path, first.get("msg", str(exc))
        ) from None
    return model.model_dump(mode="json") if outbound else model


class TypedParams:
    """The annotations of one task function: which parameters are converted or checked.

    Args:
        fn: the task function.
        strict: check plain annotations too (``strict_types=True``).
    """

    def __init__(self, fn: Callable[..., Any], strict: bool) -> None:
        self.strict = strict
        hints = _hints(fn)
        params = inspect.signature(fn).parameters
        self.types: dict[str, Any] = {n: hints[n] for n in params if n in hints and n != "return"}
        self.rich = frozenset(n for n, tp in self.types.items() if is_rich(tp))
        self.checked = frozenset(self.types) if strict else self.rich

    def to_payload(self, payload: Mapping[str, Any], task: str) -> dict[str, Any]:
        """The payload with rich values in their JSON form, checked.

        Raises:
            PayloadError: a value does not fit its annotation (the message names the field).
        """
        if not self.checked:
            return dict(payload)
        try:
            return {
                k: to_json(v, self.types[k], k) if k in self.checked else v
                for k, v in payload.items()
            }
        except TypeProblem as exc:
            raise PayloadError(f"payload does not fit {task}(): {exc}") from None

    def from_payload(self, payload: dict[str, Any], task: str) -> dict[str, Any]:
        """The decoded payload with rich values turned into their types (the worker's side).

        Raises:
            PayloadError: a value does not fit (stored by a producer that did not check).
        """
        if not self.checked:
            return payload
        try:
            return {
                k: from_json(v, self.types[k], k) if k in self.checked else v
                for k, v in payload.items()
            }
        except TypeProblem as exc:
            raise PayloadError(f"payload does not fit {task}(): {exc}") from None

    def from_text(self, name: str, raw: str) -> Any:
        """A ``key=value`` argument of ``durq enqueue`` by its annotation: a ``str``
        parameter keeps the text as is, ``bool`` takes true/false/yes/no/1/0, numbers and
        JSON types parse JSON, an enum or a datetime parameter takes its text. The value is
        then checked against the annotation.

        Raises:
            PayloadError: the converted value does not fit (``count: expected int, got str
                'many'``).
        """
        tp = self.types.get(name)
        options = _union_args(tp) or (tp,)
        value: Any
        if str in options or any(isinstance(o, type) and issubclass(o, dt.date) for o in options):
            value = raw
        elif bool in options and raw.lower() in ("true", "false", "yes", "no", "1", "0"):
            value = raw.lower() in ("true", "yes", "1")
        else:
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
        if tp is not None:
            try:
                to_json(value, tp, name)
            except TypeProblem as exc:
                raise PayloadError(str(exc)) from None
        return value
