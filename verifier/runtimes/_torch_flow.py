"""What a name in a solution's source can hold: a bounded, flow-insensitive data flow.

The audit (`_torch_audit`) asks "which module attribute can this expression be?" and
"which text can this expression be?". Spelling is no answer: `_T = torch`,
`getattr(_T, "all" + "close")`, `__import__("time")`, `sys.modules["__main__"]`,
`importlib.import_module(name)`, a helper returning `torch`, a `for m in (torch, time)`
all reach the same objects. Every binding in the module (any scope, any order) is
gathered until nothing changes, so a name holds the union of everything it is ever
assigned: conservative (a name reused for two things is both), never silent.

A value computed at run time that the flow cannot follow is `UNKNOWN` (`?`): `getattr`
with a computed attribute on `torch` is `torch.?`, `__import__(x)` with a computed `x` is
`?` itself; the audit reports what such a value reaches.

Pure and bounded: every set holds at most `MAX_VALUES` values, the fixpoint runs at most
`MAX_ROUNDS` rounds, and a resolution nests at most `MAX_RESOLVE_DEPTH` deep.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

__all__ = ["BUILTIN_NAMES", "MAX_VALUES", "UNKNOWN", "Flow", "flatten"]

UNKNOWN = "?"
"""A module or attribute named at run time: the flow cannot tell which."""
MAX_VALUES = 32
"""Most values one name or expression may hold; more are dropped (the first are kept)."""
MAX_ROUNDS = 8
"""Most rounds of the fixpoint over the module's bindings."""
MAX_RESOLVE_DEPTH = 64
"""Deepest resolution of one expression (attribute chains, calls of helpers)."""
MAX_TEXT = 4096
"""Longest constant text followed (a longer concatenation is not a constant)."""

BUILTIN_NAMES = frozenset({"open", "exec", "eval", "compile", "__import__", "setattr", "delattr",
                           "getattr", "vars", "globals", "locals", "object", "type"})
"""Builtins the audit follows by their own name (`builtins.<name>`-equivalent)."""

_IMPORTERS = frozenset({"__import__", "builtins.__import__", "importlib.import_module",
                        "importlib.__import__"})
_GETATTR = frozenset({"getattr", "builtins.getattr", "object.__getattribute__",
                      "type.__getattribute__"})
_MODULE_LOOKUPS = frozenset({"sys.modules.get", "sys.modules.__getitem__",
                             "sys.modules.setdefault", "sys.modules.pop"})


def flatten(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    """The single targets of an assignment's (possibly nested, starred) targets."""
    for t in targets:
        if isinstance(t, ast.Tuple | ast.List):
            yield from flatten(t.elts)
        elif isinstance(t, ast.Starred):
            yield from flatten([t.value])
        else:
            yield t


def _cap(values: Iterable[str]) -> frozenset[str]:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
            if len(out) >= MAX_VALUES:
                break
    return frozenset(out)


class Flow:
    """The bindings of one module: name -> the dotted names (and texts) it may hold."""

    def __init__(self, tree: ast.Module, imports: dict[str, str]) -> None:
        self.values: dict[str, frozenset[str]] = {k: frozenset({v}) for k, v in imports.items()}
        self.texts: dict[str, frozenset[str]] = {}
        self.returns: dict[str, frozenset[str]] = {}
        self._functions = _functions(tree)
        self._assigns = [n for n in ast.walk(tree) if isinstance(
            n, ast.Assign | ast.AnnAssign | ast.NamedExpr | ast.For | ast.AsyncFor
            | ast.withitem | ast.arguments)]
        self._fixpoint()

    # -- the fixpoint ---------------------------------------------------------------------

    def _fixpoint(self) -> None:
        for _ in range(MAX_ROUNDS):
            before = (dict(self.values), dict(self.texts), dict(self.returns))
            for node in self._assigns:
                for target, value in _pairs(node):
                    self._bind(target, value)
            for name, bodies in self._functions.items():
                found = [v for body in bodies for v in self.names(body)]
                if found:
                    self.returns[name] = _cap([*self.returns.get(name, ()), *found])
            if before == (self.values, self.texts, self.returns):
                return

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        key = _key(target)
        if key is None:
            return
        names = self.names(value)
        if names:
            self.values[key] = _cap([*self.values.get(key, ()), *names])
        texts = self.text(value)
        if texts is not None:
            self.texts[key] = _cap([*self.texts.get(key, ()), *texts])

    # -- resolution -----------------------------------------------------------------------

    def names(self, node: ast.AST, depth: int = 0) -> frozenset[str]:
        """The dotted names (module attributes, builtins) `node` may evaluate to."""
        if depth > MAX_RESOLVE_DEPTH:
            return frozenset()
        d = depth + 1
        if isinstance(node, ast.Name):
            found = set(self.values.get(node.id, ()))
            if node.id in BUILTIN_NAMES:
                found.add(node.id)
            if node.id == "__builtins__":
                found.add("builtins")
            return _cap(found)
        if isinstance(node, ast.Attribute):
            key = _key(node)
            if key is not None and key.startswith("self."):
                return self.values.get(key, frozenset())
            return _cap(f"{b}.{node.attr}" for b in self.names(node.value, d))
        if isinstance(node, ast.Call):
            return self._call(node, d)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, d)
        if isinstance(node, ast.IfExp):
            return self.names(node.body, d) | self.names(node.orelse, d)
        if isinstance(node, ast.BoolOp):
            return _cap(v for value in node.values for v in self.names(value, d))
        if isinstance(node, ast.NamedExpr):
            return self.names(node.value, d)
        if isinstance(node, ast.Lambda):
            return frozenset()
        return frozenset()

    def _call(self, node: ast.Call, d: int) -> frozenset[str]:
        funcs = self.names(node.func, d)
        args = node.args
        found: set[str] = set()
        for func in funcs:
            if func in _IMPORTERS and args:
                texts = self.text(args[0], d) or {UNKNOWN}
                top = func.endswith("__import__") and not _has_fromlist(node)
                found.update(t.split(".")[0] if top else t for t in texts)
            elif func in _GETATTR and len(args) >= 2:
                found.update(f"{b}.{t}" for b in self.names(args[0], d)
                             for t in (self.text(args[1], d) or {UNKNOWN}))
            elif func in ("vars", "builtins.vars") and args:
                found.update(f"{b}.__dict__" for b in self.names(args[0], d))
            elif func in _MODULE_LOOKUPS and args:
                found.update(self.text(args[0], d) or {UNKNOWN})
            elif func == "importlib.reload" and args:
                found.update(self.names(args[0], d))
        key = _key(node.func)
        if key is not None:
            found.update(self.returns.get(key.removeprefix("self."), ()))
        return _cap(found)

    def _subscript(self, node: ast.Subscript, d: int) -> frozenset[str]:
        found: set[str] = set()
        for base in self.names(node.value, d):
            if base == "sys.modules":
                found.update(self.text(node.slice, d) or {UNKNOWN})
            elif base.endswith(".__dict__"):
                found.update(f"{base.removesuffix('.__dict__')}.{t}"
                             for t in (self.text(node.slice, d) or {UNKNOWN}))
        return _cap(found)

    def text(self, node: ast.AST, depth: int = 0) -> frozenset[str] | None:
        """The constant texts `node` may be, or None when it is computed at run time."""
        if depth > MAX_RESOLVE_DEPTH:
            return None
        d = depth + 1
        if isinstance(node, ast.Constant):
            return frozenset({node.value}) if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.texts.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _joined([self.text(node.left, d), self.text(node.right, d)])
        if isinstance(node, ast.JoinedStr):
            return _joined([self.text(v.value if isinstance(v, ast.FormattedValue) else v, d)
                            for v in node.values])
        if isinstance(node, ast.IfExp):
            a, b = self.text(node.body, d), self.text(node.orelse, d)
            return None if a is None or b is None else _cap([*a, *b])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "join" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.List | ast.Tuple):
            sep = self.text(node.func.value, d)
            parts: list[frozenset[str] | None] = []
            for i, elt in enumerate(node.args[0].elts):
                if i:
                    parts.append(sep)
                parts.append(self.text(elt, d))
            return _joined(parts) if parts else frozenset({""})
        return None


def _joined(parts: list[frozenset[str] | None]) -> frozenset[str] | None:
    out: frozenset[str] = frozenset({""})
    for part in parts:
        if part is None:
            return None
        out = _cap(a + b for a in out for b in part)
        if any(len(t) > MAX_TEXT for t in out):
            return None
    return out


def _has_fromlist(node: ast.Call) -> bool:
    if len(node.args) >= 4:
        arg: ast.expr | None = node.args[3]
    else:
        arg = next((k.value for k in node.keywords if k.arg == "fromlist"), None)
    if arg is None:
        return False
    return not (isinstance(arg, ast.Constant) and not arg.value) and not (
        isinstance(arg, ast.Tuple | ast.List) and not arg.elts)


def _key(node: ast.AST) -> str | None:
    """`x` -> 'x'; `self.x` -> 'self.x'; anything else cannot hold a binding."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in ("self", "cls"):
        return f"self.{node.attr}"
    return None


def _pairs(node: ast.AST) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs an assignment-like node binds."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _unpack(target, node.value)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield from _unpack(node.target, node.value)
    elif isinstance(node, ast.NamedExpr):
        yield node.target, node.value
    elif isinstance(node, ast.For | ast.AsyncFor):
        if isinstance(node.iter, ast.Tuple | ast.List | ast.Set):
            for elt in node.iter.elts:
                yield from _unpack(node.target, elt)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield from _unpack(node.optional_vars, node.context_expr)
    elif isinstance(node, ast.arguments):
        positional = [*node.posonlyargs, *node.args]
        for arg, default in zip(positional[len(positional) - len(node.defaults):],
                                node.defaults, strict=True):
            yield ast.Name(id=arg.arg, ctx=ast.Store()), default
        for arg, kw in zip(node.kwonlyargs, node.kw_defaults, strict=True):
            if kw is not None:
                yield ast.Name(id=arg.arg, ctx=ast.Store()), kw


def _unpack(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            yield from _unpack(t, v)
    elif isinstance(target, ast.Tuple | ast.List):
        for t in flatten(target.elts):
            yield t, value  # unpacked from something the flow does not split: each may be it
    else:
        yield target, value


def _functions(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """Function (and method, and named lambda) name -> the expressions it returns."""
    out: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(node.name, []).extend(
                r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            for t in flatten(node.targets):
                key = _key(t)
                if key is not None:
                    out.setdefault(key.removeprefix("self."), []).append(node.value.body)
    return out
