"""A KernelBench problem's module-level size constants: found, rewritten, and scaled to fit.

KernelBench problems size their tensors from module-level constants (`batch_size = 16`,
`dim = 16384`, `N = 2048 * 2`, `input_shape = (32768,)`) that `get_inputs()` and
`get_init_inputs()` read when called. Changing those assignments changes every shape
derived from them, so a problem sized for a GPU can be checked on a CPU at smaller
shapes of the same form, and a check can vary each dimension on its own.

- `size_constants(source)`: every module-level `NAME = <integer expression>` (or a tuple of
  them), its value, and whether it may be scaled (and why not: a kernel size, a stride, a
  value at or below `FLOOR`, assigned twice, ...).
- `rewrite_constants(source, values)`: the same source with those assignments' right-hand
  sides replaced by literals; every other byte is kept (expressions that read a rewritten
  name, e.g. `dim2 = dim1 * 2`, follow it when the module runs).
- `scale_plan(constants, measure, budget)`: the values to check at: starting from the
  problem's own, the largest scalable constant is halved (its parity kept, never below
  `FLOOR` or the value itself when smaller; then, only where that is not enough, down to
  `LAST_FLOOR`, then `LEAST_FLOOR`) until `measure` says one call fits `budget`.
- `ScalePlan.describe()`: the sentence a statement carries ("checked at batch_size=16,
  dim=4,096; the problem's dim is 16,384").
- `dimension_variants(constants, values, pick, per_constant)`: each size constant varied on
  its own from the values run at (+1, -1, an odd prime, past `PAST_BLOCKS`), and the
  constants held with why, for a check's `correctness.shapes`.

Pure and stdlib-only: the sandboxed probe copies this file beside itself and imports it,
so it must import nothing of ktl. Every size and count here is bounded.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["FLOOR", "LAST_FLOOR", "LEAST_FLOOR", "PAST_BLOCKS", "DimensionVariant", "Footprint", "ScalePlan",
           "SizeConstant", "SizesError", "dimension_variants", "published_values",
           "rewrite_constants", "scale_plan", "size_constants"]

FLOOR = 64
"""A constant at or below this is never scaled down, and none is scaled below it while the
plan can fit otherwise: sizes up to a common block width stay as the problem gave them."""
LAST_FLOOR = 16
"""Where halving to `FLOOR` is not enough (a convolution's FLOPs), constants go down to this,
still past the 8- and 16-wide blocks."""
LEAST_FLOOR = 2
"""Where even `LAST_FLOOR` is not enough (a 3-D transposed convolution whose widest output
dimension is tied to a channel count, so it cannot move), the others go down to this: a
batch of 2 is still a batch, where the alternative is a call of hundreds of MiB whose kept
outputs exhaust ktl's own memory bound (the smallest sizes are named in the statement)."""
MAX_CONSTANTS = 256
MAX_VALUE = 2**40
MAX_STEPS = 96
NOT_SIZES = ("kernel", "stride", "pad", "dilation", "group", "head", "eps", "seed", "scale",
             "factor", "drop", "prob", "momentum", "axis", "clamp_", "value", "divisor",
             "bias", "layers", "k_size", "pool", "clamp", "slope", "alpha", "beta", "temperature",
             "margin", "p_", "window", "top", "shift", "bits", "iters", "steps", "reduce")
"""Name fragments of constants that are not tensor sizes (changing them changes the op)."""

Value = int | tuple[int, ...]
SMALL_WHY = f"at or below {FLOOR}: kept as given unless nothing else fits"


class SizesError(ValueError):
    """The source cannot be read, or a requested rewrite is not one of its constants."""


@dataclass(frozen=True)
class SizeConstant:
    """One module-level integer constant of a problem (or a tuple of integers)."""

    name: str
    value: Value
    line: int
    scalable: bool
    why: str = ""
    """Why it is not scaled (empty when it is)."""
    is_list: bool = False
    """Written as a list (`layer_sizes = [400, 800]`): a tuple value, rewritten as a list."""

    @property
    def shrinkable(self) -> bool:
        """Scalable, or small but a size: lowered (to `LAST_FLOOR`, then to `LEAST_FLOOR`) only
        where halving the larger constants to `FLOOR` was not enough."""
        return self.scalable or self.why == SMALL_WHY

    def to_json(self) -> dict[str, object]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"name": self.name, "value": value, "line": self.line, "scalable": self.scalable,
                **({"why": self.why} if self.why else {})}


@dataclass(frozen=True)
class Footprint:
    """What one call of the problem needs at some values of its constants."""

    call_bytes: int
    """Inputs plus outputs of one call, at their dtypes."""
    param_bytes: int
    flops: int = 0
    """Counted multiply-adds x 2 of matmuls and convolutions (0 when not counted)."""

    def fits(self, budget: Footprint) -> bool:
        return (self.call_bytes <= budget.call_bytes and self.param_bytes <= budget.param_bytes
                and (not budget.flops or self.flops <= budget.flops))

    def to_json(self) -> dict[str, int]:
        return {"call_bytes": self.call_bytes, "param_bytes": self.param_bytes,
                "flops": self.flops}


@dataclass(frozen=True)
class ScalePlan:
    """The constants' values to run at, and the problem's own."""

    values: dict[str, Value] = field(default_factory=dict)
    """Only the constants that were changed: name -> the value run at."""
    published: dict[str, Value] = field(default_factory=dict)
    """Every constant's value as the problem gives it."""
    footprint: Footprint | None = None
    """At the values run at."""
    published_footprint: Footprint | None = None

    @property
    def scaled(self) -> bool:
        return bool(self.values)

    def run_values(self) -> dict[str, Value]:
        return {**self.published, **self.values}

    def describe(self) -> str:
        if not self.values:
            return "checked at the problem's own sizes"
        sizes = {n: v for n, v in self.run_values().items()
                 if n in self.values or (isinstance(v, int) and v > FLOOR)}
        shown = ", ".join(f"{n}={_num(v)}" for n, v in sizes.items())
        own = ", ".join(f"{n} is {_num(self.published[n])}" for n in self.values)
        return f"checked at {shown}; the problem's {own}"

    def to_json(self) -> dict[str, object]:
        def plain(v: Value) -> object:
            return list(v) if isinstance(v, tuple) else v

        return {"values": {n: plain(v) for n, v in self.values.items()},
                "published": {n: plain(v) for n, v in self.published.items()},
                "footprint": self.footprint.to_json() if self.footprint else None,
                "published_footprint": (self.published_footprint.to_json()
                                        if self.published_footprint else None),
                "describe": self.describe()}


def _num(v: Value) -> str:
    return f"{v:,}" if isinstance(v, int) else "(" + ", ".join(f"{x:,}" for x in v) + ")"


# -- reading -----------------------------------------------------------------------------------


def _parse(source: bytes | str) -> ast.Module:
    try:
        text = source.decode("utf-8") if isinstance(source, bytes) else source
        return ast.parse(text)
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise SizesError(f"the problem is not valid Python: {exc}") from None


_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.LShift: lambda a, b: a << b if 0 <= b <= 40 else _too_big(),
    ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 and abs(a) <= 2**20 else _too_big(),
}


def _too_big() -> int:
    raise SizesError("too large")


def _eval(node: ast.expr, known: Mapping[str, Value], depth: int = 0) -> Value | None:
    """The integer (or tuple of integers) an expression of literals and known names gives."""
    if depth > 16:
        return None
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _eval(node.operand, known, depth + 1)
        return -v if isinstance(v, int) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left, known, depth + 1), _eval(node.right, known, depth + 1)
        if not isinstance(a, int) or not isinstance(b, int):
            return None
        try:
            v = _OPS[type(node.op)](a, b)
        except (SizesError, ZeroDivisionError):
            return None
        return v if abs(v) <= MAX_VALUE else None
    if isinstance(node, ast.Tuple | ast.List) and 0 < len(node.elts) <= 8:
        items = [_eval(e, known, depth + 1) for e in node.elts]
        if all(isinstance(i, int) for i in items):
            return tuple(i for i in items if isinstance(i, int))
    return None


def _not_size(name: str) -> bool:
    low = name.lower()
    return any(part in low for part in NOT_SIZES)


def _assigned(tree: ast.Module) -> list[tuple[str, ast.expr, ast.stmt]]:
    out: list[tuple[str, ast.expr, ast.stmt]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            # `height = width = 128` binds both names (rewritten as two statements)
            out += [(t.id, stmt.value, stmt) for t in stmt.targets if isinstance(t, ast.Name)]
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple)
                and len(stmt.targets[0].elts) == len(stmt.value.elts)
                and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts)):
            # `D, H, W = 32, 32, 32`: each name with its own element
            out += [(t.id, v, stmt) for t, v in zip(stmt.targets[0].elts, stmt.value.elts,
                                                     strict=True) if isinstance(t, ast.Name)]
        elif (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and stmt.value is not None):
            out.append((stmt.target.id, stmt.value, stmt))
    return out


def _rebound(tree: ast.Module) -> set[str]:
    """Names bound more than once at module level, or declared global in a function."""
    counts: dict[str, int] = {}
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            targets = [stmt.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    counts[n.id] = counts.get(n.id, 0) + (2 if isinstance(stmt, ast.AugAssign) else 1)
    out = {n for n, c in counts.items() if c > 1}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            out.update(node.names)
    return out


def size_constants(source: bytes | str) -> tuple[SizeConstant, ...]:
    """The problem's module-level integer constants, in source order (see the module doc)."""
    tree = _parse(source)
    rebound = _rebound(tree)
    known: dict[str, Value] = {}
    out: list[SizeConstant] = []
    for name, expr, stmt in _assigned(tree):
        value = _eval(expr, known)
        if value is None:
            known.pop(name, None)
            continue
        known[name] = value
        if len(out) >= MAX_CONSTANTS:
            continue
        why = ("assigned more than once" if name in rebound else
               f"follows {expr.id}" if isinstance(expr, ast.Name) else
               "not a size (its name says what it is)" if _not_size(name) else
               "not a positive size" if any(v <= 0 for v in _items(value)) else
               SMALL_WHY if max(_items(value)) <= FLOOR else "")
        out.append(SizeConstant(name, value, stmt.lineno, not why, why,
                                isinstance(expr, ast.List)))
    return tuple(out)


def _items(value: Value) -> tuple[int, ...]:
    return value if isinstance(value, tuple) else (value,)


# -- rewriting ---------------------------------------------------------------------------------


def rewrite_constants(source: bytes, values: Mapping[str, Value]) -> bytes:
    """`source` with each named constant's assignment given the new value (see the module doc).

    Raises SizesError for a name that is not one of `size_constants(source)`, or a value of
    another form (an int for a tuple) than the problem's."""
    if not values:
        return source
    constants = {c.name: c for c in size_constants(source)}
    tree = _parse(source)
    spans: dict[str, tuple[ast.expr, ast.stmt]] = {}
    for name, expr, stmt in _assigned(tree):
        if name in constants:
            spans[name] = (expr, stmt)
    for name, value in values.items():
        const = constants.get(name)
        if const is None or name not in spans:
            raise SizesError(f"{name!r} is not a module-level size constant of the problem")
        if isinstance(value, tuple) != isinstance(const.value, tuple) or (
                isinstance(value, tuple) and isinstance(const.value, tuple)
                and len(value) != len(const.value)):
            raise SizesError(f"{name!r}: the problem's value is {const.value!r}; "
                             f"{value!r} is not of that form")
        if any(type(v) is not int or not 0 < v <= MAX_VALUE for v in _items(value)):
            raise SizesError(f"{name!r}: {value!r} is not a positive size")
    lines = source.decode("utf-8").splitlines(keepends=True)
    edits: dict[int, tuple[ast.expr | ast.stmt, str]] = {}
    for name, value in values.items():
        expr, stmt = spans[name]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            text = "; ".join(f"{t} = {values.get(t, constants[t].value)!r}" for t in names)
            edits[id(stmt)] = (stmt, text)
        else:
            edits[id(expr)] = (expr, repr(list(value)) if constants[name].is_list
                               and isinstance(value, tuple) else repr(value))
    for node, text in sorted(edits.values(), key=lambda e: (e[0].lineno, e[0].col_offset),
                             reverse=True):
        assert node.end_lineno is not None and node.end_col_offset is not None
        first, last = node.lineno - 1, node.end_lineno - 1
        head = lines[first].encode("utf-8")[:node.col_offset].decode("utf-8")
        tail = lines[last].encode("utf-8")[node.end_col_offset:].decode("utf-8")
        lines[first:last + 1] = [head + text + tail]
    return "".join(lines).encode("utf-8")


# -- planning ----------------------------------------------------------------------------------


def published_values(constants: tuple[SizeConstant, ...]) -> dict[str, Value]:
    """The constants' own values, aliases left out (`num_channels = embed_dim` follows its
    source when the module runs: naming it at its own value would misstate the scale)."""
    return {c.name: c.value for c in constants if not c.why.startswith("follows ")}



Measure = Callable[[Mapping[str, Value]], Footprint | None]
"""The footprint of one call at these values of the constants; None when the problem does
not run at them (the reference rejects the shapes)."""


def _halve(value: Value, floor: int) -> Value:
    def one(v: int) -> int:
        if v <= floor:
            return v
        h = max(floor, v // 2)
        return h + 1 if v % 2 and not h % 2 and h + 1 < v else h

    return tuple(one(v) for v in value) if isinstance(value, tuple) else one(value)


def scale_plan(constants: tuple[SizeConstant, ...], measure: Measure, budget: Footprint,
               floors: tuple[int, ...] = (FLOOR, LAST_FLOOR, LEAST_FLOOR)) -> ScalePlan:
    """The values to run at: the problem's own if they fit `budget`, else the largest
    scalable constant halved step by step (a step the problem rejects is undone and that
    constant left alone) until they fit. The plan's footprint is None when the problem's
    own values cannot be measured; `ScalePlan.footprint.fits(budget)` is False when even the
    smallest values tried do not fit (the caller refuses, naming the footprint)."""
    published = published_values(constants)
    own = measure({})
    plan = ScalePlan({}, published, own, own)
    if own is None or own.fits(budget):
        return plan
    values: dict[str, Value] = {}
    current = own
    for floor in floors:
        values, current = _shrink(constants, measure, budget, floor, values, current)
        if current.fits(budget):
            break
    return ScalePlan(values, published, current, own)


def _shrink(constants: tuple[SizeConstant, ...], measure: Measure, budget: Footprint, floor: int,
            values: dict[str, Value], current: Footprint) -> tuple[dict[str, Value], Footprint]:
    frozen: set[str] = set()
    for _ in range(MAX_STEPS):
        movable = [c for c in constants if c.shrinkable and c.name not in frozen
                   and _halve(values.get(c.name, c.value), floor) != values.get(c.name, c.value)]
        if not movable:
            break
        pick = max(movable, key=lambda c: max(_items(values.get(c.name, c.value))))
        trial = {**values, pick.name: _halve(values.get(pick.name, pick.value), floor)}
        got = measure(trial)
        if got is None:
            frozen.add(pick.name)
            continue
        values, current = trial, got
        if current.fits(budget):
            break
    return values, current


# -- varying each dimension on its own ---------------------------------------------------------

PAST_BLOCKS = 4611
"""A size past the block boundaries kernels are written around (4,608 = 9 x 512, the widest
width round 4's column-dropping attacker handled): odd, so no multiple of 8, 16 or 64."""
MAX_VARIANTS_PER_CONSTANT = 4


@dataclass(frozen=True)
class DimensionVariant:
    """One size constant set to another value, every other constant as run."""

    name: str
    value: int
    base: int
    """The value the rest of the check runs at."""
    why: str
    """"+1", "-1", "odd prime", "past 4,608"."""

    def label(self) -> str:
        return f"{self.name}={self.value:,} ({self.why}; run at {self.base:,})"


def _odd_prime_below(n: int) -> int | None:
    """The largest odd prime at most `n` (None below 3)."""
    for k in range(n if n % 2 else n - 1, 2, -2):
        if all(k % d for d in range(3, int(k ** 0.5) + 1, 2)):
            return k
    return None


def _values_for(v: int) -> list[tuple[int, str]]:
    """Another value of a size `v`: +1 and -1 (off every block boundary v sits on), an odd
    prime about three quarters of it (no multiple of 8/16/64), and one past `PAST_BLOCKS`."""
    out: list[tuple[int, str]] = [(v + 1, "+1")]
    if v - 1 >= 2:
        out.append((v - 1, "-1"))
    prime = _odd_prime_below(max(3, v * 3 // 4))
    if prime is not None and prime not in (v - 1, v, v + 1):
        out.append((prime, "odd prime"))
    if v + 1 < PAST_BLOCKS:
        out.append((PAST_BLOCKS, "past 4,608"))
    return out


def dimension_variants(constants: tuple[SizeConstant, ...], values: Mapping[str, Value],
                       pick: Callable[[int], int], per_constant: int,
                       ) -> tuple[list[DimensionVariant], list[str]]:
    """Each size constant varied on its own (see `_values_for`), at most `per_constant` values
    each: the one past `PAST_BLOCKS` always among them, the rest chosen by `pick(n)` (an
    index below n, the check's random draw). Returns the variants and, for each size that
    is not varied, why ("widths held at (3, 5): a tuple of sizes"). Constants that are not
    sizes (kernel_size, eps, ...) and aliases (they follow their source) are not dimensions."""
    per = max(1, min(per_constant, MAX_VARIANTS_PER_CONSTANT))
    out: list[DimensionVariant] = []
    held: list[str] = []
    last = {c.name: c for c in constants}  # a name bound twice: its value when modules run
    for c in last.values():
        if not c.shrinkable and c.why != "assigned more than once":
            continue
        v = values.get(c.name, c.value)
        if not isinstance(v, int):
            held.append(f"{c.name} held at {_num(v)}: a tuple of sizes")
            continue
        if not c.shrinkable:
            held.append(f"{c.name} held at {v:,}: {c.why}")
            continue
        options = _values_for(v)
        chosen = [o for o in options if o[1] == "past 4,608"][:per]
        rest = [o for o in options if o not in chosen]
        while rest and len(chosen) < per:
            chosen.append(rest.pop(pick(len(rest)) % len(rest)))
        out += [DimensionVariant(c.name, value, v, why) for value, why in chosen]
    return out, held
