"""A tiny declarative schema: one description drives both validation and the JSON Schema files.

Each `Spec` checks a decoded-JSON value at a field path and returns a cleaned copy
(numbers as float, lists as lists), raising `ValidationError(path, problem)` on the
first thing wrong. `Spec.schema()` renders the same rules as JSON Schema 2020-12, so
the published schema files cannot drift from what the code enforces.

The second half declares predicate nodes with those rules, each field once: a dataclass
field carries its wire rule, and everything else (validation when built, `from_json`,
`to_json`, the JSON Schema) is derived from it.

A node is a frozen, keyword-only dataclass that subclasses `Node`::

    class Target(Node, path="target", doc="where the kernel is meant to run"):
        hardware_class: str = json_field(Str(64))
        parent: str | None = json_field(Nullable(HEX64), default=None)

- `json_field(rule)` is the field's one definition: its JSON key is the attribute name, its
  rule a `Spec` from `attest._spec` (or a `Node` subclass, or `List(Nested(...))` for a list
  of nodes). Declaration order is the order of the JSON Schema's properties.
- A field with a default is optional on the wire: absence means the default, and
  `to_json` leaves the field out while it holds its default. A field without one is
  required (a `Nullable` rule makes it required-but-may-be-null).
- Objects validate when built, the python-tuf way: `Node(...)` checks every field against its
  rule (lists become tuples, numbers floats) and then the class's cross-field rules
  (`_validate(path)`); `from_json` checks the body in one pass (nested nodes are built by
  their own rules on the way down) and does not check it again in the constructor.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, dataclass_transform

from attest._errors import ValidationError

MAX_SAFE_INT = 2**53 - 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NO_CONTROL_PATTERN = "^[^\\u0000-\\u001f\\u007f]*$"
_NO_CONTROL_TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f]*$"


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def field_suffix(key: str) -> str:
    """`.key`, or `['key']` when the key is not a plain identifier."""
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{key!r}]"


def field_path(path: str, key: str) -> str:
    """`path.key`, or `path['key']` when the key is not a plain identifier."""
    return path + field_suffix(key)


class Spec:
    """Base of all field rules."""

    doc: str | None = None

    def check(self, value: object, path: str) -> Any:
        raise ValidationError(path, "no rule")  # pragma: no cover - every subclass overrides

    def _schema(self) -> dict[str, Any]:
        return {}  # pragma: no cover - every subclass overrides

    def schema(self) -> dict[str, Any]:
        out = self._schema()
        if self.doc:
            out = {"description": self.doc, **out}
        return out


class Str(Spec):
    """A string with length caps, an optional full-match pattern, and no control characters
    (free text may hold newlines and tabs)."""

    def __init__(
        self,
        max_len: int,
        *,
        min_len: int = 1,
        pattern: str | None = None,
        hint: str | None = None,
        text: bool = False,
        doc: str | None = None,
    ) -> None:
        self.min_len = min_len
        self.max_len = max_len
        self.pattern = pattern
        self._re = re.compile(pattern) if pattern else None
        self.hint = hint
        self.text = text
        self.doc = doc

    def check(self, value: object, path: str) -> str:
        if not isinstance(value, str):
            raise ValidationError(path, f"must be a string, got {json_type(value)}")
        if len(value) < self.min_len:
            raise ValidationError(path, "must not be empty" if self.min_len == 1
                                  else f"must be at least {self.min_len} characters")
        if len(value) > self.max_len:
            raise ValidationError(path, f"must be at most {self.max_len} characters, got {len(value)}")
        if (_CONTROL_TEXT if self.text else _CONTROL).search(value):
            raise ValidationError(path, "must not contain control characters")
        if self._re is not None and not self._re.fullmatch(value):
            raise ValidationError(path, self.hint or f"must match the pattern {self.pattern}")
        return value

    def _schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", "minLength": self.min_len, "maxLength": self.max_len}
        if self.pattern:
            out["pattern"] = f"^(?:{self.pattern})$"
        else:
            out["pattern"] = _NO_CONTROL_TEXT_PATTERN if self.text else _NO_CONTROL_PATTERN
        return out


class Int(Spec):
    """An integer (never a boolean) in [minimum, maximum]."""

    def __init__(self, minimum: int = 0, maximum: int = MAX_SAFE_INT, *, doc: str | None = None) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.doc = doc

    def check(self, value: object, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(path, f"must be an integer, got {json_type(value)}")
        if not self.minimum <= value <= self.maximum:
            raise ValidationError(path, f"must be between {self.minimum} and {self.maximum}, got {value}")
        return value

    def _schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}


class Num(Spec):
    """A finite number (integer or float, never a boolean) >= minimum; returned as float."""

    def __init__(self, minimum: float | None = 0.0, *, doc: str | None = None) -> None:
        self.minimum = minimum
        self.doc = doc

    def check(self, value: object, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(path, f"must be a number, got {json_type(value)}")
        if isinstance(value, int) and abs(value) > MAX_SAFE_INT:
            raise ValidationError(path, "must be a number within the exact JSON integer range")
        number = float(value)
        if not math.isfinite(number):
            raise ValidationError(path, "must be a finite number (no NaN or infinity)")
        if self.minimum is not None and number < self.minimum:
            raise ValidationError(path, f"must be >= {self.minimum:g}, got {number!r}")
        return number

    def _schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "number"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        return out


class Bool(Spec):
    def __init__(self, *, doc: str | None = None) -> None:
        self.doc = doc

    def check(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise ValidationError(path, f"must be true or false, got {json_type(value)}")
        return value

    def _schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


class Enum(Spec):
    """One of a fixed set of strings."""

    def __init__(self, *values: str, doc: str | None = None) -> None:
        self.values = values
        self.doc = doc

    def check(self, value: object, path: str) -> str:
        if not isinstance(value, str) or value not in self.values:
            allowed = ", ".join(repr(v) for v in self.values)
            raise ValidationError(path, f"must be one of {allowed}, got {value!r}"[:300])
        return value

    def _schema(self) -> dict[str, Any]:
        return {"enum": list(self.values)}


class Nullable(Spec):
    """null, or a value the inner rule accepts."""

    def __init__(self, inner: Spec, *, doc: str | None = None) -> None:
        self.inner = inner
        self.doc = doc

    def check(self, value: object, path: str) -> Any:
        return None if value is None else self.inner.check(value, path)

    def _schema(self) -> dict[str, Any]:
        return {"anyOf": [self.inner.schema(), {"type": "null"}]}


class List(Spec):
    """An array of items with a count cap (optionally with distinct items)."""

    def __init__(
        self, item: Spec, *, max_items: int, min_items: int = 0, unique: bool = False,
        doc: str | None = None,
    ) -> None:
        self.item = item
        self.min_items = min_items
        self.max_items = max_items
        self.unique = unique
        self.doc = doc

    def check(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise ValidationError(path, f"must be an array, got {json_type(value)}")
        if len(value) < self.min_items:
            raise ValidationError(path, f"must have at least {self.min_items} item(s)")
        if len(value) > self.max_items:
            raise ValidationError(path, f"must have at most {self.max_items} items, got {len(value)}")
        out = [self.item.check(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if self.unique:
            seen: list[Any] = []
            for i, item in enumerate(out):
                if item in seen:
                    raise ValidationError(f"{path}[{i}]", "duplicates an earlier item")
                seen.append(item)
        return out

    def _schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", "items": self.item.schema(),
                               "minItems": self.min_items, "maxItems": self.max_items}
        if self.unique:
            out["uniqueItems"] = True
        return out


class Interval(Spec):
    """[low, high]: two finite numbers >= minimum with low <= high; returned as a tuple."""

    def __init__(self, minimum: float | None = 0.0, *, doc: str | None = None) -> None:
        self.number = Num(minimum)
        self.doc = doc

    def check(self, value: object, path: str) -> tuple[float, float]:
        problem = "must be [low, high] with low <= high"
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise ValidationError(path, problem)
        low = self.number.check(value[0], f"{path}[0]")
        high = self.number.check(value[1], f"{path}[1]")
        if low > high:
            raise ValidationError(path, problem)
        return (low, high)

    def _schema(self) -> dict[str, Any]:
        number = self.number.schema()
        return {"type": "array", "prefixItems": [number, number], "items": False,
                "minItems": 2, "maxItems": 2}


class Obj(Spec):
    """An object with known fields: missing required and unknown fields are errors."""

    def __init__(
        self, fields: Mapping[str, Spec], *, optional: Sequence[str] = (), doc: str | None = None,
    ) -> None:
        self.fields = dict(fields)
        self.optional = frozenset(optional)
        self.doc = doc
        self._rules = [(key, rule, field_suffix(key)) for key, rule in self.fields.items()]

    def check(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError(path, f"must be an object, got {json_type(value)}")
        if not value.keys() <= self.fields.keys():
            extra = next(k for k in value if k not in self.fields)
            allowed = ", ".join(self.fields)
            raise ValidationError(field_path(path, str(extra)), f"unknown field (allowed: {allowed})")
        out: dict[str, Any] = {}
        for key, rule, suffix in self._rules:
            if key not in value:
                if key in self.optional:
                    continue
                raise ValidationError(path + suffix, "required field is missing")
            out[key] = rule.check(value[key], path + suffix)
        return out

    def _schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: v.schema() for k, v in self.fields.items()},
            "required": [k for k in self.fields if k not in self.optional],
            "additionalProperties": False,
        }


class Map(Spec):
    """An object used as a dictionary: keys match a pattern, values follow one rule."""

    def __init__(
        self, key: Str, value: Spec, *, max_items: int, min_items: int = 0, doc: str | None = None,
    ) -> None:
        self.key = key
        self.value = value
        self.min_items = min_items
        self.max_items = max_items
        self.doc = doc

    def check(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError(path, f"must be an object, got {json_type(value)}")
        if len(value) < self.min_items:
            raise ValidationError(path, f"must have at least {self.min_items} entr(ies)")
        if len(value) > self.max_items:
            raise ValidationError(path, f"must have at most {self.max_items} entries, got {len(value)}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = field_path(path, str(key))
            self.key.check(key, sub)
            out[key] = self.value.check(item, sub)
        return out

    def _schema(self) -> dict[str, Any]:
        key = self.key.schema()
        key.pop("type", None)
        return {"type": "object", "propertyNames": key, "additionalProperties": self.value.schema(),
                "minProperties": self.min_items, "maxProperties": self.max_items}


# ---- nodes: dataclass fields that carry their rule ----------------------------------------

_RULE = "attest.rule"
# The path of a body `from_json` has just checked: its constructor need not check it again.
_PRECHECKED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "attest_prechecked", default=None)


def json_field(rule: Spec | type[Node], *, default: Any = dataclasses.MISSING) -> Any:
    """A node field with its wire rule (and, if optional on the wire, its default); a node
    class as the rule means a nested node."""
    spec = Nested(rule) if isinstance(rule, type) else rule
    return dataclasses.field(default=default, metadata={_RULE: spec})


class Nested(Spec):
    """A field (or list item) that is another node: checked and built by that node's rules."""

    def __init__(self, node: type[Node], *, doc: str | None = None) -> None:
        self.node = node
        self.doc = doc

    def check(self, value: object, path: str) -> Any:
        if isinstance(value, self.node):
            return value  # validated when it was built
        return self.node.from_json(value, path)

    def _schema(self) -> dict[str, Any]:
        return self.node.spec().schema()


def _freeze(value: Any) -> Any:
    """A checked JSON value as a node holds it: arrays as tuples."""
    return tuple(value) if isinstance(value, list) else value


def _thaw(value: Any) -> Any:
    """A node's field value as JSON: nodes by their own `to_json`, tuples as arrays."""
    if isinstance(value, Node):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    return value


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(json_field,))
class Node:
    """Base of every predicate node; see the module docstring."""

    _PATH: ClassVar[str] = "predicate"
    _DOC: ClassVar[str | None] = None
    _RULES: ClassVar[tuple[tuple[str, Spec, Any], ...]] = ()
    _SPEC_CACHE: ClassVar[Obj | None] = None

    def __init_subclass__(cls, *, path: str | None = None, doc: str | None = None,
                          **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if path is not None:
            cls._PATH = path
        cls._DOC = doc
        cls._SPEC_CACHE = None
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        cls._RULES = tuple((f.name, f.metadata[_RULE], f.default)
                           for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def spec(cls) -> Obj:
        """The node's wire rule, derived from its fields (built on first use)."""
        if cls._SPEC_CACHE is None:
            cls._SPEC_CACHE = Obj(
                {name: rule for name, rule, _ in cls._RULES},
                optional=[name for name, _, default in cls._RULES
                          if default is not dataclasses.MISSING],
                doc=cls._DOC)
        return cls._SPEC_CACHE

    @classmethod
    def rule(cls, name: str) -> Spec:
        """The wire rule of one field, for checking a value before the node is built (e.g.
        a manifest's field, so a kernel the statement would refuse is refused up front)."""
        for field_name, rule, _ in cls._RULES:
            if field_name == name:
                return rule
        raise KeyError(name)

    @classmethod
    def from_json(cls, obj: object, path: str | None = None) -> Self:
        """Strictly parse a decoded JSON body; errors name the field (`path.field[i]...`)."""
        where = path or cls._PATH
        checked = cls.spec().check(obj, where)
        token = _PRECHECKED.set(where)
        try:
            return cls(**{k: _freeze(v) for k, v in checked.items()})
        finally:
            _PRECHECKED.reset(token)

    def __post_init__(self) -> None:
        where = _PRECHECKED.get()
        if where is None:
            where = self._PATH
            for name, rule, default in self._RULES:
                value = getattr(self, name)
                if default is not dataclasses.MISSING and value == default:
                    continue
                object.__setattr__(self, name, _freeze(rule.check(value, field_path(where, name))))
        else:
            _PRECHECKED.set(None)
        self._validate(where)

    def _validate(self, path: str) -> None:
        """Cross-field rules; nodes that have some override this and raise ValidationError."""

    def to_json(self) -> dict[str, Any]:
        """The body as JSON: every field, less optional ones holding their default."""
        out: dict[str, Any] = {}
        for name, _, default in self._RULES:
            value = getattr(self, name)
            if default is not dataclasses.MISSING and value == default:
                continue
            out[name] = _thaw(value)
        return out

