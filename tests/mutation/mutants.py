"""The mutation operators: find every mutant of a module's source and build one.

A mutant is the module with exactly one small change, of the kinds a slip in
the verification code would make:

- ``compare``: a comparison negated (``==``/``!=``, ``<``/``>=``, ``in``/``not in``,
  ``is``/``is not``) or its boundary moved (``<`` to ``<=``, ``>`` to ``>=``, ...);
- ``binop``: an arithmetic or bit operator swapped (``+``/``-``, ``*``/``//``,
  ``<<``/``>>``, ``&``/``|``, ...), in expressions and augmented assignments;
- ``boolop``: ``and`` and ``or`` swapped; ``not``: a ``not`` dropped;
- ``negate``: the condition of an ``if``, ``while``, ``x if c else y`` or a
  comprehension's ``if`` negated;
- ``constant``: an integer ``n`` made ``n + 1``, ``True``/``False`` flipped, a byte
  string's first byte changed, a string given an ``XX`` prefix;
- ``return``: ``return x`` made ``return None``;
- ``raise`` and ``call``: a ``raise`` statement or a call statement deleted;
- ``loop``: ``break`` and ``continue`` swapped.

Left alone, because a change there is not a change of behaviour under test:
docstrings, type annotations, decorators, ``__all__``, ``if TYPE_CHECKING:``
blocks, and the text of exception messages (deleting the ``raise`` is the
mutant that matters there).

Mutants are numbered in a fixed walk of the syntax tree, so the same source
always gives the same list, and each has a ``key`` that names it without line
numbers (scope, original, replacement, occurrence) so a list of equivalent
mutants keeps matching while unrelated code moves.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "enumerate_mutants", "mutated_tree"]

_COMPARE: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Lt: (ast.GtE, ast.LtE),
    ast.LtE: (ast.Gt, ast.Lt),
    ast.Gt: (ast.LtE, ast.GtE),
    ast.GtE: (ast.Lt, ast.Gt),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}
_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitOr,
}
_SKIP_FIELDS = frozenset({"annotation", "returns", "decorator_list", "type_comment"})
_MAX_TEXT = 120


@dataclass(frozen=True)
class Mutant:
    """One mutant of one module: where it is and what it changes."""

    index: int
    kind: str
    scope: str
    line: int
    original: str
    mutated: str
    occurrence: int

    @property
    def key(self) -> str:
        """A name for the mutant that does not depend on line numbers."""
        suffix = f" #{self.occurrence}" if self.occurrence else ""
        return f"{self.scope} | {self.original} -> {self.mutated}{suffix}"


@dataclass
class _Point:
    kind: str
    scope: str
    line: int
    original: str
    mutated: str
    apply: Callable[[], None]


def _text(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_skipped_stmt(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom | ast.Import):
        return True
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    if isinstance(stmt, ast.If):
        return "TYPE_CHECKING" in ast.unparse(stmt.test)
    return False


class _Walker:
    """Collects mutation points in a fixed order; each point can apply itself once."""

    def __init__(self) -> None:
        self.points: list[_Point] = []

    def walk(self, node: ast.AST, scope: str, quiet: bool) -> Iterator[_Point]:
        for field, value in ast.iter_fields(node):
            if field in _SKIP_FIELDS:
                continue
            if isinstance(value, list):
                yield from self._walk_list(node, value, scope, quiet)
            elif isinstance(value, ast.AST):
                yield from self._expr_points(node, field, value, scope, quiet)
                yield from self.walk(value, self._scope(value, scope), quiet or _quiet(value))

    def _walk_list(
        self, parent: ast.AST, items: list[ast.AST | None], scope: str, quiet: bool
    ) -> Iterator[_Point]:
        for i, child in enumerate(items):
            if child is None:  # the key of a ``**mapping`` in a dict display
                continue
            if isinstance(child, ast.stmt):
                if (i == 0 and _is_docstring(child)) or _is_skipped_stmt(child):
                    continue
                yield from self._stmt_points(items, i, child, scope)
            elif isinstance(child, ast.expr):
                yield from self._list_expr_points(items, i, child, scope, quiet)
            yield from self.walk(child, self._scope(child, scope), quiet or _quiet(child))

    @staticmethod
    def _scope(node: ast.AST, scope: str) -> str:
        name = None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign) and scope == "<module>":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                name = targets[0].id  # a module constant is its own scope
        if name is None:
            return scope
        return name if scope == "<module>" else f"{scope}.{name}"

    def _stmt_points(
        self, items: list[ast.AST], i: int, stmt: ast.stmt, scope: str
    ) -> Iterator[_Point]:
        def replace(new: ast.stmt) -> Callable[[], None]:
            def apply() -> None:
                items[i] = ast.copy_location(new, stmt)

            return apply

        line = stmt.lineno
        if isinstance(stmt, ast.Raise):
            yield _Point("raise", scope, line, _text(stmt), "pass", replace(ast.Pass()))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield _Point("call", scope, line, _text(stmt), "pass", replace(ast.Pass()))
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            is_none = isinstance(stmt.value, ast.Constant) and stmt.value.value is None
            if not is_none:
                new = ast.Return(value=ast.Constant(value=None))
                yield _Point("return", scope, line, _text(stmt), "return None", replace(new))
        elif isinstance(stmt, ast.AugAssign) and type(stmt.op) in _BINOP:
            aug = copy.copy(stmt)
            aug.op = _BINOP[type(stmt.op)]()
            yield _Point("binop", scope, line, _text(stmt), _text(aug), replace(aug))
        elif isinstance(stmt, ast.Break):
            yield _Point("loop", scope, line, "break", "continue", replace(ast.Continue()))
        elif isinstance(stmt, ast.Continue):
            yield _Point("loop", scope, line, "continue", "break", replace(ast.Break()))
        if isinstance(stmt, ast.If | ast.While):
            yield self._negate(stmt, "test", stmt.test, scope, "if" if isinstance(stmt, ast.If) else "while")

    def _negate(self, parent: ast.AST, field: str, test: ast.expr, scope: str, word: str) -> _Point:
        new = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else (
            ast.UnaryOp(op=ast.Not(), operand=test)
        )

        def apply() -> None:
            setattr(parent, field, ast.copy_location(new, test))

        return _Point("negate", scope, test.lineno, f"{word} {_text(test)}", f"{word} {_text(new)}", apply)

    def _expr_points(
        self, parent: ast.AST, field: str, node: ast.AST, scope: str, quiet: bool
    ) -> Iterator[_Point]:
        if isinstance(parent, ast.IfExp) and field == "test" and isinstance(node, ast.expr):
            yield self._negate(parent, field, node, scope, "if")
        if not isinstance(node, ast.expr):
            return

        def setter(new: ast.expr) -> Callable[[], None]:
            def apply() -> None:
                setattr(parent, field, ast.copy_location(new, node))

            return apply

        is_test = field == "test" and isinstance(parent, ast.If | ast.While | ast.IfExp)
        yield from self._node_points(node, scope, quiet, setter, is_test)

    def _list_expr_points(
        self, items: list[ast.AST], i: int, node: ast.expr, scope: str, quiet: bool
    ) -> Iterator[_Point]:
        def setter(new: ast.expr) -> Callable[[], None]:
            def apply() -> None:
                items[i] = ast.copy_location(new, node)

            return apply

        yield from self._node_points(node, scope, quiet, setter, False)

    def _node_points(
        self,
        node: ast.expr,
        scope: str,
        quiet: bool,
        setter: Callable[[ast.expr], Callable[[], None]],
        is_test: bool,
    ) -> Iterator[_Point]:
        line = node.lineno
        if isinstance(node, ast.Constant) and not quiet:
            new_value = _constant(node.value)
            if new_value is not None:
                new = ast.Constant(value=new_value[0])
                yield _Point("constant", scope, line, _text(node), _text(new), setter(new))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and not is_test:
            yield _Point("not", scope, line, _text(node), _text(node.operand), setter(node.operand))
        elif isinstance(node, ast.BoolOp):
            new = copy.copy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield _Point("boolop", scope, line, _text(node), _text(new), setter(new))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
            new = copy.copy(node)
            new.op = _BINOP[type(node.op)]()
            yield _Point("binop", scope, line, _text(node), _text(new), setter(new))
        elif isinstance(node, ast.Compare):
            yield from _compare_points(node, scope, setter)
        for comp in getattr(node, "generators", []):
            for j, cond in enumerate(comp.ifs):
                yield self._negate_in_list(comp.ifs, j, cond, scope)

    @staticmethod
    def _negate_in_list(items: list[ast.expr], j: int, cond: ast.expr, scope: str) -> _Point:
        new = ast.UnaryOp(op=ast.Not(), operand=cond)

        def apply() -> None:
            items[j] = ast.copy_location(new, cond)

        return _Point("negate", scope, cond.lineno, f"if {_text(cond)}", f"if {_text(new)}", apply)


def _compare_points(
    node: ast.Compare, scope: str, setter: Callable[[ast.expr], Callable[[], None]]
) -> Iterator[_Point]:
    for k, op in enumerate(node.ops):
        for alt in _COMPARE.get(type(op), ()):
            new = copy.copy(node)
            new.ops = [*node.ops[:k], alt(), *node.ops[k + 1 :]]
            yield _Point("compare", scope, node.lineno, _text(node), _text(new), setter(new))


def _constant(value: object) -> tuple[object] | None:
    if isinstance(value, bool):
        return (not value,)
    if isinstance(value, int):
        return (value + 1,)
    if isinstance(value, bytes):
        return (bytes([value[0] ^ 0x01]) + value[1:] if value else b"X",)
    if isinstance(value, str):
        return ("XX" + value,)
    return None


def _quiet(node: ast.AST) -> bool:
    """Inside these, constants are message text, not behaviour: leave them alone."""
    return isinstance(node, ast.Raise | ast.JoinedStr)


def _points(tree: ast.Module) -> list[_Point]:
    return list(_Walker().walk(tree, "<module>", False))


def enumerate_mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source``, in a fixed order."""
    seen: dict[tuple[str, str, str], int] = {}
    out = []
    for index, p in enumerate(_points(ast.parse(source))):
        ident = (p.scope, p.original, p.mutated)
        occurrence = seen.get(ident, 0)
        seen[ident] = occurrence + 1
        out.append(Mutant(index, p.kind, p.scope, p.line, p.original, p.mutated, occurrence))
    return out


def mutated_tree(source: str, index: int) -> ast.Module:
    """The syntax tree of ``source`` with mutant ``index`` applied."""
    tree = ast.parse(source)
    points = _points(tree)
    if not 0 <= index < len(points):
        raise IndexError(f"mutant {index} does not exist (0..{len(points) - 1})")
    points[index].apply()
    return ast.fix_missing_locations(tree)
