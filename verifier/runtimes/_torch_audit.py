"""Static findings on a torch/triton solution's source: what a reader should look at first.

Pure and bounded: source bytes in, a tuple of typed `Finding`s out; nothing is imported
or run. Findings are evidence for a human beside the verdict, not the verdict: the
sandbox and the checks decide. Each kind names one way a generated `ModelNew` is known
to game a harness run in its own process:

- `torch_fallback`: a `try`/`except` whose handler calls PyTorch or the reference
  (the custom kernel fails, the library answers), or an import of the reference module;
- `torch_only`: no custom kernel at all (no `load_inline`, `cpp_extension.load` or
  `@triton.jit`), or one that `ModelNew` never reaches: the whole computation is
  PyTorch's own ops;
- `environment_read`: `os.environ`, `os.getenv` and kin;
- `filesystem_read`: `open`, `os`/`pathlib`/`glob`/`shutil` file access, `torch.load`,
  `numpy.load`;
- `thread_start`: `threading`, `multiprocessing`, `concurrent.futures`, `subprocess`,
  `os.fork`/`os.system`/`os.exec*`/`os.spawn*`;
- `introspection`: `gc`, `inspect`, `ctypes`, `cffi`, `sys._getframe`, frame attributes;
- `dynamic_code`: `exec`, `eval`, `compile`, `__import__`, `importlib` (code this audit
  cannot see);
- `patching`: assignment to (or `setattr`/`delattr` on) an attribute of `time`, `torch`
  (any submodule, `torch.cuda` included) or `builtins`;
- `unparsed`: the source is not Python this audit can read (too large, too deep,
  not UTF-8, a syntax error), so none of the above could be looked for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["FINDING_KINDS", "MAX_AUDIT_BYTES", "MAX_FINDINGS", "Finding", "FindingKind",
           "audit_solution"]

FindingKind = Literal["torch_fallback", "torch_only", "environment_read", "filesystem_read",
                      "thread_start", "introspection", "dynamic_code", "patching", "unparsed"]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)

MAX_AUDIT_BYTES = 1024 * 1024
"""Largest source audited (the cap on one kernel source file)."""
MAX_NODES = 200_000
"""Most syntax-tree nodes walked; a larger tree is reported as `unparsed`."""
MAX_FINDINGS = 64
"""Most findings returned; the last one says how many more there were."""
MAX_DEPTH = 200
"""Deepest nesting of the source accepted (Python's own parser fails near 1,000)."""

_ENV = frozenset({"os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv",
                  "os.unsetenv", "posix.environ", "nt.environ"})
_FS_CALLS = frozenset({"open", "io.open", "builtins.open", "os.open", "os.listdir", "os.scandir",
                       "os.walk", "os.stat", "os.lstat", "os.readlink", "os.fdopen",
                       "torch.load", "numpy.load", "numpy.fromfile", "numpy.loadtxt",
                       "numpy.genfromtxt", "numpy.memmap", "mmap.mmap"})
_FS_PREFIXES = ("os.path.", "pathlib.", "glob.", "shutil.", "tempfile.", "fileinput.")
_FS_METHODS = frozenset({"read_text", "read_bytes", "iterdir", "rglob", "glob"})
_THREAD_MODULES = ("threading", "_thread", "multiprocessing", "concurrent", "subprocess",
                   "torch.multiprocessing", "asyncio", "pty", "signal")
_THREAD_CALLS = frozenset({"os.fork", "os.forkpty", "os.system", "os.popen", "os.posix_spawn",
                           "os.posix_spawnp", "os.register_at_fork"})
_THREAD_CALL_PREFIXES = ("os.exec", "os.spawn")
_INTROSPECTION_MODULES = ("gc", "inspect", "ctypes", "cffi", "traceback", "tracemalloc")
_INTROSPECTION_NAMES = frozenset({"sys._getframe", "sys._current_frames", "sys.settrace",
                                  "sys.setprofile", "sys.modules", "sys.getrefcount",
                                  "sys.getobjects", "threading.settrace"})
_FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame",
                          "cr_frame", "__subclasses__", "__globals__", "__closure__"})
_DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "__import__", "builtins.exec",
                            "builtins.eval", "builtins.__import__"})
_PATCHED_ROOTS = ("time", "torch", "builtins", "triton")
_KERNEL_BUILDERS = frozenset({"torch.utils.cpp_extension.load_inline",
                              "torch.utils.cpp_extension.load", "torch.ops.load_library"})
_TRITON_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
_REFERENCE_MODULES = frozenset({"reference", "problem"})
_REFERENCE_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs"})


@dataclass(frozen=True)
class Finding:
    """One static finding: its kind, the 1-based source line (0: the whole file), a detail."""

    kind: FindingKind
    line: int
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "detail": self.detail}


def audit_solution(source: bytes) -> tuple[Finding, ...]:
    """Static findings on a solution's source, in source order, at most MAX_FINDINGS."""
    tree, problem = _parse(source)
    if tree is None:
        return (Finding("unparsed", 0, problem),)
    audit = _Audit(_aliases(tree))
    found = sorted(set(audit.run(tree)), key=lambda f: (f.line, f.kind, f.detail))
    if len(found) > MAX_FINDINGS:
        extra = len(found) - MAX_FINDINGS + 1
        found = [*found[:MAX_FINDINGS - 1],
                 Finding(found[MAX_FINDINGS - 1].kind, found[MAX_FINDINGS - 1].line,
                         f"and {extra} more findings not listed")]
    return tuple(found)


def _parse(source: bytes) -> tuple[ast.Module | None, str]:
    if len(source) > MAX_AUDIT_BYTES:
        return None, f"{len(source)} bytes; the audit reads at most {MAX_AUDIT_BYTES}"
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: {exc}"
    depth = _max_bracket_depth(text)
    if depth > MAX_DEPTH:
        return None, f"nested {depth} brackets deep; the audit reads at most {MAX_DEPTH}"
    try:
        tree = ast.parse(text, filename="solution.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"not valid Python: {type(exc).__name__}: {exc}"[:500]
    for count, _ in enumerate(ast.walk(tree), 1):
        if count > MAX_NODES:
            return None, f"more than {MAX_NODES} syntax nodes"
    return tree, ""


def _max_bracket_depth(text: str) -> int:
    """Bracket nesting, an upper bound on expression depth (strings counted too: a bound)."""
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth = max(depth - 1, 0)
    return deepest


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name for every import in the module (any scope)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module or ''}.{a.name}".lstrip(".")
    return names


def _under(name: str, roots: Iterable[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


class _Audit:
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.reference_attrs: set[str] = set()

    def is_reference(self, func: ast.expr) -> bool:
        """`Model`, `reference.Model`, `super().forward` or `self.x` where x holds a Model."""
        name = self.dotted(func)
        if name is not None:
            return name.split(".")[-1] in _REFERENCE_NAMES
        if isinstance(func, ast.Name):
            return func.id in _REFERENCE_NAMES
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self":
            return func.attr in self.reference_attrs
        return _is_super_forward(func)

    def find_reference_attrs(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and self.is_reference(node.value.func):
                self.reference_attrs.update(
                    t.attr for t in _flatten(node.targets) if isinstance(t, ast.Attribute))

    def dotted(self, node: ast.AST) -> str | None:
        """`F.gelu` -> 'torch.nn.functional.gelu' when F is an import alias; else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.aliases.get(node.id)
        if head is None:
            return ".".join([node.id, *reversed(parts)]) if node.id in _BUILTINS else None
        return ".".join([head, *reversed(parts)])

    def run(self, tree: ast.Module) -> Iterator[Finding]:
        self.find_reference_attrs(tree)
        yield from self.imports(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Try | ast.TryStar):
                yield from self.fallbacks(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                yield from self.patches(node)
            elif isinstance(node, ast.Call):
                yield from self.call(node)
            elif isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
                yield from self.reference(node)
        yield from self.custom_kernel(tree)

    def imports(self, tree: ast.Module) -> Iterator[Finding]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                modules = [base] if node.level == 0 else [base or "."]
                modules += [f"{base}.{a.name}" for a in node.names if node.level == 0]
            else:
                continue
            for module in modules:
                yield from self.module_use(module, node.lineno, "imports")

    def module_use(self, name: str, line: int, verb: str) -> Iterator[Finding]:
        if _under(name, _THREAD_MODULES):
            yield Finding("thread_start", line, f"{verb} {name}: threads or processes of its own")
        if _under(name, _INTROSPECTION_MODULES):
            yield Finding("introspection", line, f"{verb} {name}: can read the harness's memory "
                          "or frames")
        if _under(name, ("importlib",)):
            yield Finding("dynamic_code", line, f"{verb} {name}: code loaded at run time")
        if name in _REFERENCE_MODULES:
            yield Finding("torch_fallback", line, f"{verb} {name}: the reference itself")

    def reference(self, node: ast.Attribute | ast.Name) -> Iterator[Finding]:
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
            yield Finding("introspection", node.lineno, f"reads .{node.attr}")
        name = self.dotted(node)
        if name is None:
            return
        if name in _ENV:
            yield Finding("environment_read", node.lineno, f"reads {name}")
        if name in _INTROSPECTION_NAMES:
            yield Finding("introspection", node.lineno, f"uses {name}")

    def call(self, node: ast.Call) -> Iterator[Finding]:
        func = node.func
        name = self.dotted(func)
        if isinstance(func, ast.Attribute) and func.attr in _FS_METHODS and (
                name is None or not _under(name, ("torch",))):
            yield Finding("filesystem_read", node.lineno, f"calls .{func.attr}()")
        if name is None:
            return
        if name in _FS_CALLS or name.startswith(_FS_PREFIXES):
            yield Finding("filesystem_read", node.lineno, f"calls {name}")
        if name in _THREAD_CALLS or name.startswith(_THREAD_CALL_PREFIXES):
            yield Finding("thread_start", node.lineno, f"calls {name}")
        if name in _DYNAMIC_CALLS:
            yield Finding("dynamic_code", node.lineno, f"calls {name}: code this audit cannot see")
        if name in ("setattr", "delattr", "builtins.setattr") and node.args:
            target = self.dotted(node.args[0])
            if target is not None and _under(target, _PATCHED_ROOTS):
                yield Finding("patching", node.lineno, f"{name}() on {target}")

    def patches(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> Iterator[Finding]:
        targets = (node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target])
        for target in _flatten(targets):
            if isinstance(target, ast.Attribute | ast.Subscript):
                base = target.value
                name = self.dotted(base)
                if name is not None and _under(name, _PATCHED_ROOTS):
                    what = f"{name}.{target.attr}" if isinstance(target, ast.Attribute) else name
                    yield Finding("patching", node.lineno, f"replaces {what}")

    def fallbacks(self, node: ast.Try | ast.TryStar) -> Iterator[Finding]:
        for handler in node.handlers:
            for inner in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
                if not isinstance(inner, ast.Call):
                    continue
                name = self.dotted(inner.func)
                if self.is_reference(inner.func):
                    yield Finding("torch_fallback", inner.lineno,
                                  f"except handler (line {handler.lineno}) calls the reference")
                elif name is not None and _under(name, ("torch",)):
                    yield Finding("torch_fallback", inner.lineno,
                                  f"except handler (line {handler.lineno}) calls {name}")

    def custom_kernel(self, tree: ast.Module) -> Iterator[Finding]:
        kernels = self.kernel_names(tree)
        if not kernels:
            yield Finding("torch_only", 0, "no custom kernel (load_inline, cpp_extension.load or "
                          "@triton.jit): the whole computation is PyTorch's own ops")
            return
        model = next((n for n in tree.body if isinstance(n, ast.ClassDef)
                      and n.name == "ModelNew"), None)
        if model is None:
            return
        if not _reaches(model, kernels, _module_defs(tree)):
            yield Finding("torch_only", model.lineno, "builds a custom kernel "
                          f"({', '.join(sorted(kernels))}) but ModelNew never calls it")

    def kernel_names(self, tree: ast.Module) -> set[str]:
        """Module-level names bound to a built extension or a Triton kernel."""
        names: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                    self.dotted(d.func if isinstance(d, ast.Call) else d) in _TRITON_DECORATORS
                    for d in node.decorator_list):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
                if any(self.dotted(c.func) in _KERNEL_BUILDERS for c in calls):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(t.id for t in _flatten(targets) if isinstance(t, ast.Name))
        return names


def _flatten(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    for t in targets:
        if isinstance(t, ast.Tuple | ast.List):
            yield from _flatten(t.elts)
        elif isinstance(t, ast.Starred):
            yield from _flatten([t.value])
        else:
            yield t


def _is_super_forward(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "forward"
            and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super")


def _module_defs(tree: ast.Module) -> dict[str, ast.AST]:
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in _flatten(node.targets):
                if isinstance(t, ast.Name):
                    defs[t.id] = node
    return defs


def _reaches(start: ast.AST, kernels: set[str], defs: dict[str, ast.AST]) -> bool:
    """Whether `start` names a kernel, directly or through module-level definitions."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                if inner.id in kernels:
                    return True
                if inner.id in defs and inner.id not in seen:
                    seen.add(inner.id)
                    todo.append(defs[inner.id])
    return False


_BUILTINS = frozenset({"open", "exec", "eval", "compile", "__import__", "setattr", "delattr"})
