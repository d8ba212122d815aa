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
- `patching`: assignment to (or `setattr`/`delattr`/`__setattr__`/`__dict__` writes on) an
  attribute of any module (`torch` and its submodules, `time`, `os`, `builtins`, a module
  named at run time: the solution's modules are the worker's modules too), an entry of
  `sys.modules`, or a frame's globals or locals;
- `harness_access`: the worker's own code (`__main__`, `__mp_main__`, ktl's packages)
  imported, looked up or rewritten: the candidate's process runs the worker's script as
  `__main__`, and its frame reader and writer are what calibrate and carry every answer;
- `opaque_code`: code the audit cannot see at all: `exec`/`eval`/`compile` of text computed
  at run time, `__import__`/`importlib.import_module` of a computed name, `marshal`/`pickle`
  loads, `types.CodeType`/`FunctionType` (text that is constant is read and audited as part
  of the source, its findings on the line of the call);
- `device_branch`: a branch whose test depends on the device (`x.is_cuda`, `x.device`,
  `torch.cuda.is_available()`, `torch.version.cuda`, `TRITON_INTERPRET`): a run on one kind of
  device exercises one side only, and the report names it;
- `unparsed`: the source is not Python this audit can read (too large, too deep,
  not UTF-8, a syntax error), so none of the above could be looked for.

Names are followed by data flow, not spelling (`verifier.runtimes._torch_flow`): an alias
(`_T = torch`), `getattr`/`setattr` with a constant or computed name, `__import__`,
`importlib`, `sys.modules[...]`, `vars(...)`, a helper returning a module, tuple unpacking
and `for m in (a, b)` all resolve to what they hold. A helper (function, method or lambda)
that reaches PyTorch's work or the reference, directly or through other helpers, makes an
`except` handler that calls it a fallback (allocation alone, `torch.empty` and kin, does not).

`FAILING_KINDS` are the kinds that fail a check; the others are evidence beside the verdict.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

from verifier.runtimes._torch_flow import BUILTIN_NAMES, UNKNOWN, Flow, flatten

__all__ = ["FAILING_KINDS", "FINDING_KINDS", "MAX_AUDIT_BYTES", "MAX_FINDINGS", "Finding", "FindingKind",
           "audit_solution"]

FindingKind = Literal["torch_fallback", "torch_only", "environment_read", "filesystem_read",
                      "thread_start", "introspection", "dynamic_code", "patching",
                      "harness_access", "opaque_code", "device_branch", "unparsed"]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)
FAILING_KINDS: frozenset[FindingKind] = frozenset({"torch_fallback", "patching", "harness_access",
                                                   "opaque_code"})
"""Findings that fail a check: a fallback hands the op back to PyTorch (the kernel claims a
speed-up for the library's work); patching a module or the worker's code rewrites the
harness's own tools in the candidate's process (its clock, its frame reader, torch's
comparison); code the audit cannot see could be any of these."""

MAX_AUDIT_BYTES = 1024 * 1024
"""Largest source audited (the cap on one kernel source file)."""
MAX_NODES = 200_000
"""Most syntax-tree nodes walked; a larger tree is reported as `unparsed`."""
MAX_FINDINGS = 64
"""Most findings returned; the last one says how many more there were."""
MAX_DEPTH = 200
"""Deepest nesting of the source accepted (Python's own parser fails near 1,000)."""
MAX_INLINED = 16
"""Most constant texts given to `exec`/`eval`/`compile` read and audited with the source."""
MAX_INLINE_ROUNDS = 3
"""Deepest nesting of such texts followed (an `exec` of an `exec` of ...)."""

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
_DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "builtins.exec", "builtins.eval",
                            "builtins.compile"})
_CODE_RUNNERS = _DYNAMIC_CALLS
_CODE_CALLS = frozenset({"exec", "eval", "builtins.exec", "builtins.eval"})
_IMPORT_CALLS = frozenset({"__import__", "builtins.__import__", "importlib.import_module",
                           "importlib.__import__"})
_OPAQUE_CALLS = frozenset({"marshal.loads", "marshal.load", "pickle.loads", "pickle.load",
                           "types.CodeType", "types.FunctionType", "dill.loads",
                           "cloudpickle.loads", "runpy.run_path", "runpy.run_module",
                           "code.InteractiveInterpreter"})
_SETATTR = frozenset({"setattr", "delattr", "builtins.setattr", "builtins.delattr",
                      "object.__setattr__", "object.__delattr__", "type.__setattr__"})
_WRITER_METHODS = frozenset({"__setattr__", "__delattr__", "update", "setdefault", "__setitem__",
                             "__delitem__", "pop", "popitem", "clear"})
_HARNESS_MODULES = ("__main__", "__mp_main__", "_torch_child", "verifier", "ktl", "client",
                    "attest", "ledger")
_DEVICE_ATTRS = frozenset({"is_cuda", "is_cpu", "is_mps", "is_xpu", "is_meta", "device",
                           "device_type"})
_DEVICE_NAMES = ("torch.cuda.is_available", "torch.cuda.device_count", "torch.version.cuda",
                 "torch.version.hip", "torch.cuda.get_device", "torch.backends.mps",
                 "torch.cuda.is_initialized", "triton.runtime.driver", "triton.runtime.interpreter")
_ALLOCATION = frozenset({"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
                         "full", "full_like", "empty_strided", "tensor", "as_tensor", "device",
                         "Size", "is_tensor", "numel", "cdiv", "dtype", "finfo", "iinfo",
                         "is_available"})
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
    tree = _inline_constant_code(tree)
    audit = _Audit(tree, _aliases(tree))
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


def _inline_constant_code(tree: ast.Module) -> ast.Module:
    """The source with every constant text given to `exec`/`eval`/`compile` parsed and
    appended (its nodes on the line of the call), so the audit reads what runs."""
    seen: set[str] = set()
    budget = MAX_AUDIT_BYTES
    for _ in range(MAX_INLINE_ROUNDS):
        flow = Flow(tree, _aliases(tree))
        added: list[ast.stmt] = []
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args):
            if not flow.names(call.func) & _CODE_RUNNERS:
                continue
            for text in sorted(flow.text(call.args[0]) or ()):
                if text in seen or len(seen) >= MAX_INLINED or len(text) > budget:
                    continue
                seen.add(text)
                budget -= len(text)
                added.extend(_parsed_at(text, call.lineno))
        if not added:
            break
        tree = ast.Module(body=[*tree.body, *added], type_ignores=[])
    return tree


def _parsed_at(text: str, line: int) -> list[ast.stmt]:
    if _max_bracket_depth(text) > MAX_DEPTH:
        return []
    try:
        inner = ast.parse(text, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    for node in ast.walk(inner):
        if isinstance(node, ast.stmt | ast.expr | ast.excepthandler | ast.arg | ast.keyword
                      | ast.alias | ast.pattern):
            node.lineno = node.end_lineno = line
    return inner.body


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
    def __init__(self, tree: ast.Module, aliases: dict[str, str]) -> None:
        self.flow = Flow(tree, aliases)
        self.reference_attrs: set[str] = set()
        self.helpers: dict[str, str] = {}

    def names(self, node: ast.AST) -> frozenset[str]:
        """The dotted names `node` may be (`verifier.runtimes._torch_flow`)."""
        return self.flow.names(node)

    def is_reference(self, func: ast.expr) -> bool:
        """`Model`, `reference.Model`, `super().forward` or `self.x` where x holds a Model."""
        if any(n.split(".")[-1] in _REFERENCE_NAMES for n in self.names(func)):
            return True
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
                    t.attr for t in flatten(node.targets) if isinstance(t, ast.Attribute))

    def library_call(self, func: ast.expr) -> str | None:
        """What `func` reaches of PyTorch's work or the reference, or None."""
        if self.is_reference(func):
            return "the reference"
        torch_names = sorted(n for n in self.names(func) if _under(n, ("torch",)))
        if torch_names:
            return torch_names[0]
        key = _helper_key(func)
        return self.helpers.get(key) if key is not None else None

    def find_helpers(self, tree: ast.Module) -> None:
        """Functions (any scope, by name) whose body reaches PyTorch's work or the reference,
        directly or through other such functions: name -> what it reaches."""
        bodies: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                bodies.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in flatten(node.targets):
                    key = _helper_key(t)
                    if key is not None:
                        bodies.setdefault(key, []).append(node.value)
        for _ in range(len(bodies) + 1):
            changed = False
            for name, nodes in bodies.items():
                if name in self.helpers:
                    continue
                for call in (c for n in nodes for c in ast.walk(n) if isinstance(c, ast.Call)):
                    what = self.library_call(call.func)
                    if what is not None and not _is_allocation(what):
                        self.helpers[name] = what
                        changed = True
                        break
            if not changed:
                return

    def run(self, tree: ast.Module) -> Iterator[Finding]:
        self.find_reference_attrs(tree)
        self.find_helpers(tree)
        yield from self.imports(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Try | ast.TryStar):
                yield from self.fallbacks(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                yield from self.patches(node)
            elif isinstance(node, ast.Call):
                yield from self.call(node)
                yield from self.method_patch(node)
            elif isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
                yield from self.reference(node)
            if isinstance(node, ast.If | ast.IfExp | ast.While | ast.Assert):
                yield from self.device_branch(node)
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
        if _under(name, _HARNESS_MODULES):
            yield Finding("harness_access", line, f"{verb} {name}: the worker's own code")
        if name == UNKNOWN:
            yield Finding("opaque_code", line, f"{verb} a module named at run time")

    def reference(self, node: ast.Attribute | ast.Name) -> Iterator[Finding]:
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
            yield Finding("introspection", node.lineno, f"reads .{node.attr}")
        for name in sorted(self.names(node)):
            if name in _ENV:
                yield Finding("environment_read", node.lineno, f"reads {name}")
            if name in _INTROSPECTION_NAMES:
                yield Finding("introspection", node.lineno, f"uses {name}")
            if _under(name, _HARNESS_MODULES) and isinstance(node, ast.Name):
                yield Finding("harness_access", node.lineno, f"reaches {name}: the worker's own "
                              "code")

    def call(self, node: ast.Call) -> Iterator[Finding]:
        func = node.func
        names = self.names(func)
        if isinstance(func, ast.Attribute) and func.attr in _FS_METHODS and not any(
                _under(n, ("torch",)) for n in names):
            yield Finding("filesystem_read", node.lineno, f"calls .{func.attr}()")
        for name in sorted(names):
            yield from self.named_call(node, name)

    def named_call(self, node: ast.Call, name: str) -> Iterator[Finding]:
        if name in _FS_CALLS or name.startswith(_FS_PREFIXES):
            yield Finding("filesystem_read", node.lineno, f"calls {name}")
        if name in _THREAD_CALLS or name.startswith(_THREAD_CALL_PREFIXES):
            yield Finding("thread_start", node.lineno, f"calls {name}")
        if name in _DYNAMIC_CALLS or name in _IMPORT_CALLS:
            yield Finding("dynamic_code", node.lineno, f"calls {name}: code this audit cannot see")
            if node.args and self.flow.text(node.args[0]) is None \
                    and not (name in _CODE_CALLS and _is_code_object(node.args[0], self)):
                yield Finding("opaque_code", node.lineno, f"calls {name} on text computed at run "
                              "time: what it runs or loads cannot be audited")
            for module in self.names(node) if name in _IMPORT_CALLS else ():
                yield from self.module_use(module, node.lineno, f"{name}() loads")
        if name in _OPAQUE_CALLS:
            yield Finding("opaque_code", node.lineno, f"calls {name}: code this audit cannot see")
        if name in _SETATTR and node.args:
            yield from self.set_on(node, node.args[0], f"{name}()",
                                   node.args[1] if len(node.args) > 1 else None)

    def set_on(self, node: ast.AST, target: ast.expr, how: str,
               attr: ast.expr | None) -> Iterator[Finding]:
        line = getattr(node, "lineno", 0)
        computed = attr is not None and self.flow.text(attr) is None
        for base in sorted(self.names(target)):
            if _patched(base):
                tail = " with an attribute named at run time" if computed else ""
                yield Finding("patching", line, f"{how} on {base}{tail}")
                if _under(base, _HARNESS_MODULES):
                    yield Finding("harness_access", line, f"{how} on {base}: rewrites the "
                                  "worker's own code")
        if isinstance(target, ast.Attribute) and target.attr in _FRAME_ATTRS:
            yield Finding("patching", line, f"{how} on a frame's .{target.attr}: rewrites the "
                          "caller's (the harness's) names")

    def method_patch(self, node: ast.Call) -> Iterator[Finding]:
        """`torch.__setattr__(...)`, `vars(torch).update(...)`, `torch.__dict__[...]` writers."""
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in _WRITER_METHODS:
            return
        if func.attr in ("__setattr__", "__delattr__"):
            yield from self.set_on(node, func.value, f".{func.attr}()",
                                   node.args[0] if node.args else None)
            return
        owner = func.value
        if isinstance(owner, ast.Attribute) and owner.attr in ("__dict__", *_FRAME_ATTRS):
            yield from self.set_on(node, owner.value, f".{owner.attr}.{func.attr}()", None)
            if owner.attr in _FRAME_ATTRS:
                yield from self.set_on(node, owner, f".{func.attr}()", None)
        elif any(n.endswith(".__dict__") for n in self.names(owner)):
            bases = [n.removesuffix(".__dict__") for n in self.names(owner)]
            for base in sorted(b for b in bases if _patched(b)):
                yield Finding("patching", node.lineno, f"vars().{func.attr}() on {base}")

    def patches(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> Iterator[Finding]:
        targets = (node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target])
        for target in flatten(targets):
            if isinstance(target, ast.Attribute):
                for name in sorted(self.names(target.value)):
                    if _patched(name):
                        yield Finding("patching", node.lineno, f"replaces {name}.{target.attr}")
                        if _under(name, _HARNESS_MODULES):
                            yield Finding("harness_access", node.lineno,
                                          f"replaces {name}.{target.attr}: the worker's own code")
            elif isinstance(target, ast.Subscript):
                yield from self.subscript_patch(node, target)

    def subscript_patch(self, node: ast.AST, target: ast.Subscript) -> Iterator[Finding]:
        base = target.value
        line = getattr(node, "lineno", 0)
        if isinstance(base, ast.Attribute) and base.attr in _FRAME_ATTRS:
            yield Finding("patching", line, f"writes into a frame's .{base.attr}: rewrites the "
                          "caller's (the harness's) names")
        for name in sorted(self.names(base)):
            owner = name.removesuffix(".__dict__")
            if name == "sys.modules":
                yield Finding("patching", line, "replaces an entry of sys.modules")
            elif _patched(owner):
                yield Finding("patching", line, f"replaces {owner}[...]" if owner == name
                              else f"writes into {owner}.__dict__")

    def fallbacks(self, node: ast.Try | ast.TryStar) -> Iterator[Finding]:
        for handler in node.handlers:
            for inner in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
                if not isinstance(inner, ast.Call):
                    continue
                if self.is_reference(inner.func):
                    yield Finding("torch_fallback", inner.lineno,
                                  f"except handler (line {handler.lineno}) calls the reference")
                    continue
                torch_names = sorted(n for n in self.names(inner.func) if _under(n, ("torch",)))
                key = _helper_key(inner.func)
                if torch_names:
                    yield Finding("torch_fallback", inner.lineno,
                                  f"except handler (line {handler.lineno}) calls {torch_names[0]}")
                elif key is not None and key in self.helpers:
                    yield Finding("torch_fallback", inner.lineno,
                                  f"except handler (line {handler.lineno}) calls {key}(), which "
                                  f"reaches {self.helpers[key]}")

    def device_branch(self, node: ast.If | ast.IfExp | ast.While | ast.Assert) -> Iterator[Finding]:
        """A branch whose test depends on where the code runs: a CPU run takes one side only."""
        for inner in ast.walk(node.test):
            what = None
            if isinstance(inner, ast.Attribute) and inner.attr in _DEVICE_ATTRS:
                what = f".{inner.attr}"
            elif isinstance(inner, ast.Attribute | ast.Name | ast.Call):
                what = next((n for n in sorted(self.names(inner))
                             if n.startswith(_DEVICE_NAMES)), None)
            if isinstance(inner, ast.Constant) and inner.value == "TRITON_INTERPRET":
                what = "TRITON_INTERPRET"
            if what is not None:
                yield Finding("device_branch", node.lineno, f"branches on {what}: a run on one "
                              "kind of device takes one side only")
                return

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
                    self.names(d.func if isinstance(d, ast.Call) else d) & _TRITON_DECORATORS
                    for d in node.decorator_list):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
                if any(self.names(c.func) & _KERNEL_BUILDERS for c in calls):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(t.id for t in flatten(targets) if isinstance(t, ast.Name))
        return names


def _helper_key(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in ("self", "cls"):
        return func.attr
    return None


def _is_allocation(name: str) -> bool:
    return name.split(".")[-1] in _ALLOCATION or _under(name, ("torch.cuda", "torch.device"))


def _is_code_object(node: ast.expr, audit: _Audit) -> bool:
    """`exec(compile(<constant>, ...))`: the text compiled is audited where it is compiled."""
    return isinstance(node, ast.Call) and bool(audit.names(node.func) & {"compile",
                                                                         "builtins.compile"})


def _patched(name: str) -> bool:
    """Whether writing an attribute of `name` rewrites code shared with the harness. Every
    name the flow resolves comes from an import (the solution's modules are the worker's
    modules too: `torch`, `time`, `os`, `__main__`), a module named at run time, or a
    builtin; only a builtin function's own attributes are not shared code."""
    return name.split(".")[0] not in BUILTIN_NAMES


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
            for t in flatten(node.targets):
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


