"""`ktl import kernelbench`: a KernelBench-format problem and solution become a kernel folder.

The problem (a module defining `Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`)
is untrusted code: it runs only in a sandboxed child (`verifier.runtimes.probe_problem`)
that measures one call at the problem's own sizes on torch's meta device, picks smaller
values of its size constants where a check could not run it here (the folder keeps the
problem as published; `sizes` in the answer says what a check runs it at), and prints one
bounded JSON line describing the inputs and outputs; ktl's own process never imports it.
Init and forward arguments may be any plain value (numbers, strings, None, lists and
tuples of them, nested); they are recorded as given.

Holds the importer (one module: the probe's child lives in `verifier.runtimes`). The solution is read, never run: its syntax tree must define
`ModelNew`, and whether it imports Triton picks the runtime. What cannot be mapped
(no Model, outputs other than tensors and numbers, a dtype outside float32/float16/bfloat16, ...) is
refused with an `ImportRefused` that says why, and nothing is written.

May import: `client.errors` and `verifier` (its kernel model,
environment and sandbox); nothing else of the client imports it but `client.cli`.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from client.errors import InputError
from verifier.environment import TORCH_INSTALL_HINT, module_runtime_missing
from verifier.errors import KernelSpecError
from verifier.kernel import (
    MANIFEST,
    MAX_SOURCE_BYTES,
    NAME_RE,
    TORCH_DTYPES,
    TORCH_ENTRY,
    TORCH_OP,
    KernelSpec,
)
from verifier.runtimes import ProbeFailed, ProblemTooLarge, ScalePlan, check_budget, check_ceiling
from verifier.runtimes import probe_problem as run_probe

__all__ = ["SCALAR_ADAPTER_MARK", "ImportOptions", "ImportRefusal", "ImportRefused", "ImportResult",
           "ProblemInfo", "TensorInfo", "import_kernelbench", "probe_problem", "scalar_adapter",
           "solution_as_given"]

REFERENCE_FILE = "reference.py"
SOLUTION_FILE = "solution.py"
MAX_ITEMS = 64
MAX_DIMS = 8
MAX_EXTRA_SOURCES = 16
_EXTRA_EXT = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".cu", ".cuh", ".py")
_NAME_PART = re.compile(r"[^a-z0-9._-]+")


ImportRefusal = Literal["solution", "problem", "does_not_fit", "needs_gpu",
                        "runtime_unavailable"]
"""Why an import was refused, typed: the solution's fault, the problem's (it cannot be mapped
or run), or a limit of this machine (`attest.predicates.MachineLimit`)."""


class ImportRefused(InputError):
    """The problem or solution cannot be mapped onto a kernel folder; the message says why and
    `kind` which side it is (`ktl import --json` prints it as `error.kind`)."""

    def __init__(self, message: str, kind: ImportRefusal = "problem") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of the problem: a tensor (dtype, shape) or a scalar (type, value)."""

    kind: str
    """"tensor", "scalar" (a number or bool) or "value" (any other plain value)."""
    dtype: str | None = None
    shape: tuple[int, ...] = ()
    value: Any = None
    """A scalar's number, or a plain value as the probe encodes it (tuples {"tuple": [...]})."""

    def describe(self) -> str:
        if self.kind == "tensor":
            return f"{self.dtype}[{', '.join(map(str, self.shape))}]"
        if self.kind == "value":
            return f"{self.dtype} {plain_text(self.value)}"[:200]
        return f"{self.dtype} {self.value!r}"

    def to_json(self) -> dict[str, Any]:
        if self.kind == "tensor":
            return {"kind": "tensor", "dtype": self.dtype, "shape": list(self.shape)}
        return {"kind": self.kind, "type": self.dtype, "value": self.value}


@dataclass(frozen=True)
class ProblemInfo:
    """What the sandboxed child saw of the problem."""

    torch_version: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    init: tuple[TensorInfo, ...]
    parameter_dtypes: tuple[str, ...]
    scale: ScalePlan = field(default_factory=ScalePlan)
    """The sizes the problem was run at here (its own, or smaller: `ScalePlan.describe`)."""

    @property
    def dtype(self) -> str:
        """The one floating-point dtype of the inputs (or outputs); ImportRefused otherwise."""
        floats = {t.dtype for t in self.inputs if t.kind == "tensor" and _is_float(t.dtype)}
        where = "get_inputs()"
        if not floats:
            floats = {t.dtype for t in self.outputs if _is_float(t.dtype)}
            where = "the outputs"
        if not floats:
            raise ImportRefused("neither get_inputs() nor the outputs hold a floating-point "
                                f"tensor; ktl maps problems in {', '.join(TORCH_DTYPES)}")
        if len(floats) > 1:
            raise ImportRefused(f"{where} mix dtypes {sorted(str(f) for f in floats)}; "
                                "a kernel folder declares one dtype")
        dtype = str(floats.pop())
        if dtype not in TORCH_DTYPES:
            raise ImportRefused(f"{where} are {dtype}; ktl maps {', '.join(TORCH_DTYPES)} "
                                "(give --dtype to import it as one of those)")
        return dtype


@dataclass(frozen=True)
class ImportOptions:
    """The folder's identity and what the manifest records besides the problem."""

    name: str | None = None
    version: str = "0.1.0"
    runtime: str | None = None
    dtype: str | None = None
    hardware_class: str = "cpu"
    agent: str = "unknown"
    agent_version: str = "0"
    model: str = "unknown"
    extra_sources: tuple[Path, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ImportResult:
    directory: Path
    spec: KernelSpec
    problem: ProblemInfo

    def to_json(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "name": self.spec.name,
                "runtime": self.spec.runtime, "dtype": self.spec.dtype,
                "reference_sha256": self.spec.reference_digest,
                "sources": list(self.spec.sources), "torch": self.problem.torch_version,
                "inputs": [t.to_json() for t in self.problem.inputs],
                "outputs": [t.to_json() for t in self.problem.outputs],
                "init": [t.to_json() for t in self.problem.init],
                "sizes": self.problem.scale.to_json()}


def _is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype.startswith("bfloat")
                                  or dtype in ("half", "double"))


# -- reading the files ---------------------------------------------------------------------


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise InputError(f"{what} {path}: not a file")
    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise InputError(f"{what} {path}: {size} bytes; the cap is {MAX_SOURCE_BYTES}")
    return path.read_bytes()


def solution_runtime(source: bytes, init_count: int | None = None) -> str:
    """'triton' or 'torch' from the solution's imports; ImportRefused without ModelNew."""
    try:
        tree = ast.parse(source.decode("utf-8"), filename=SOLUTION_FILE)
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise ImportRefused(f"the solution is not valid Python: {exc}", "solution") from None
    model: ast.stmt | None = None
    for stmt in tree.body:
        if (isinstance(stmt, ast.ClassDef) and stmt.name == TORCH_ENTRY) or (
                isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == TORCH_ENTRY for t in stmt.targets)):
            model = stmt
    if model is None:
        raise ImportRefused(f"the solution defines no {TORCH_ENTRY} at module level; "
                            f"a KernelBench solution is a class {TORCH_ENTRY}(nn.Module)",
                            "solution")
    if isinstance(model, ast.ClassDef) and init_count is not None:
        _check_init_arity(model, init_count)
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(n == "triton" or n.startswith("triton.") for n in names):
            return "triton"
    return "torch"


def _check_init_arity(model: ast.ClassDef, count: int) -> None:
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None)
    if init is None:
        return
    args = init.args
    positional = [*args.posonlyargs, *args.args][1:]
    required = len(positional) - len(args.defaults)
    if args.vararg is None and len(positional) < count:
        raise ImportRefused(f"{TORCH_ENTRY}.__init__ takes {len(positional)} arguments but "
                            f"get_init_inputs() gives {count}; it must take Model's arguments",
                            "solution")
    if required > count:
        raise ImportRefused(f"{TORCH_ENTRY}.__init__ needs {required} arguments but "
                            f"get_init_inputs() gives {count}; it must take Model's arguments",
                            "solution")


# -- the sandboxed probe -------------------------------------------------------------------


def probe_problem(problem: bytes, timeout_s: float = 180.0) -> ProblemInfo:
    """Run the problem in a sandboxed child (verifier.runtimes.probe_problem): its size
    constants, what one call needs, the sizes a check runs it at, and a description there."""
    missing = module_runtime_missing("torch")
    if missing:
        raise ImportRefused(f"ktl import kernelbench runs the problem with torch: {missing}",
                            "runtime_unavailable")
    try:
        probed = run_probe(problem, check_budget(), timeout_s, ceiling=check_ceiling())
    except ProbeFailed as exc:
        raise ImportRefused(f"running the problem in the sandbox gave no answer: {exc}",
                            "does_not_fit" if isinstance(exc, ProblemTooLarge) else "problem"
                            ) from None
    info = parse_body(probed.body)
    return ProblemInfo(info.torch_version, info.inputs, info.outputs, info.init,
                       info.parameter_dtypes, probed.plan)


def parse_probe(text: str) -> ProblemInfo:
    """The child's JSON, checked field by field (it came from untrusted code's process)."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ImportRefused(f"the sandboxed probe's answer is not JSON: {exc}") from None
    return parse_body(obj)


def parse_body(obj: Any) -> ProblemInfo:
    """The child's answer as parsed JSON, checked field by field."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("ok"), bool):
        raise ImportRefused("the sandboxed probe's answer is malformed")
    if not obj["ok"]:
        error = obj.get("error")
        message = error[:600] if isinstance(error, str) else "no reason given"
        if obj.get("missing") == "torch":
            message += f"; install torch: {TORCH_INSTALL_HINT}"
        raise ImportRefused(f"cannot map the problem: {message}")
    inputs = _items(obj, "inputs", "input_count", "get_inputs()")
    outputs = _items(obj, "outputs", "output_count", "the outputs")
    init = _items(obj, "init", "init_count", "get_init_inputs()")
    torch_version = obj.get("torch")
    params = obj.get("parameters")
    if not isinstance(torch_version, str) or not isinstance(params, list) or not all(
            isinstance(p, str) for p in params):
        raise ImportRefused("the sandboxed probe's answer is malformed (torch, parameters)")
    return ProblemInfo(torch_version[:64], inputs, outputs, init,
                       tuple(p[:32] for p in params[:MAX_ITEMS]))


def _items(obj: Mapping[str, Any], key: str, count_key: str, what: str) -> tuple[TensorInfo, ...]:
    items, count = obj.get(key), obj.get(count_key)
    if not isinstance(items, list) or not isinstance(count, int) or isinstance(count, bool):
        raise ImportRefused(f"the sandboxed probe's answer is malformed ({key})")
    if count > MAX_ITEMS or len(items) != count:
        raise ImportRefused(f"{what} has {count} items; ktl maps at most {MAX_ITEMS}")
    if key == "outputs" and count == 0:
        raise ImportRefused("Model.forward returned an empty sequence; ktl compares tensors")
    if key == "outputs":
        for i, x in enumerate(items):
            if isinstance(x, Mapping) and x.get("kind") not in ("tensor", "scalar"):
                kind = x.get("type") if isinstance(x.get("type"), str) else "value"
                raise ImportRefused(f"output {i} of Model.forward is a {str(kind)[:64]}, not a "
                                    "tensor or a number; ktl compares tensors and numbers only")
    return tuple(_item(x, f"{what}[{i}]") for i, x in enumerate(items))


def _item(x: Any, where: str) -> TensorInfo:
    if not isinstance(x, Mapping):
        raise ImportRefused(f"the sandboxed probe's answer is malformed ({where})")
    kind = x.get("kind")
    if kind == "tensor":
        dtype, shape = x.get("dtype"), x.get("shape")
        if not (isinstance(dtype, str) and re.fullmatch(r"[a-z0-9_]{1,32}", dtype)
                and isinstance(shape, list) and all(type(d) is int and 0 <= d < 2**40
                                                    for d in shape)):
            raise ImportRefused(f"the sandboxed probe's answer is malformed ({where})")
        if len(shape) > MAX_DIMS:
            raise ImportRefused(f"{where} has {len(shape)} dimensions; ktl maps at most {MAX_DIMS}")
        if dtype.startswith("complex"):
            raise ImportRefused(f"{where} is {dtype}; ktl maps real tensors only")
        return TensorInfo("tensor", dtype, tuple(shape))
    if kind == "scalar":
        kind_of, value = x.get("type"), x.get("value")
        ok = {"int": lambda v: type(v) is int, "bool": lambda v: type(v) is bool,
              "float": lambda v: type(v) in (int, float) and math.isfinite(v)}
        if kind_of not in ok or not ok[kind_of](value):
            raise ImportRefused(f"the sandboxed probe's answer is malformed ({where})")
        return TensorInfo("scalar", kind_of, (), value)
    if kind == "value" and where.startswith(("get_inputs", "get_init_inputs")):
        kind_of = x.get("type")
        if not isinstance(kind_of, str) or not _is_plain(x.get("value")):
            raise ImportRefused(f"the sandboxed probe's answer is malformed ({where})")
        return TensorInfo("value", kind_of[:32], (), x.get("value"))
    type_name = x.get("type") if isinstance(x.get("type"), str) else "value"
    raise ImportRefused(f"{where} is a {str(type_name)[:64]}; ktl maps tensors and plain "
                        "values (numbers, strings, None, lists and tuples of them) only")


def _is_plain(value: Any, depth: int = 0) -> bool:
    """A plain value as the probe encodes it: JSON scalars, lists, {"tuple": [...]}."""
    if depth > MAX_DIMS:
        return False
    if value is None or isinstance(value, bool | int | str) or (
            isinstance(value, float) and math.isfinite(value)):
        return True
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(_is_plain(v, depth + 1) for v in value)
    if isinstance(value, Mapping) and list(value) == ["tuple"]:
        return _is_plain(value["tuple"], depth)
    return False


def plain_text(value: Any) -> str:
    """A probe-encoded plain value as Python writes it: {"tuple": [3, 5]} -> (3, 5)."""
    if isinstance(value, Mapping) and list(value) == ["tuple"]:
        items = [plain_text(v) for v in value["tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(plain_text(v) for v in value) + "]"
    return repr(value)


# -- writing the folder ----------------------------------------------------------------------

SCALAR_ADAPTER_MARK = "# --- added by `ktl import kernelbench`: scalar outputs as 0-dim tensors"


def scalar_adapter(cls: str, dtype: str) -> bytes:
    """Lines appended to the reference and the solution when Model.forward returns a Python
    number: ktl compares tensors, so every number forward returns (alone, or in a tuple or
    list) is returned as a 0-dim tensor of the same value: a float at the kernel's dtype
    (as a tensor output of that dtype would be judged), an int as int64, a bool as bool.
    Tensors pass unchanged, so a solution that returns a tensor where the reference returns
    a number is judged on its shape like any other output. Stated in kernel.toml."""
    return f"""

{SCALAR_ADAPTER_MARK}
# (ktl compares tensors: each number forward returns becomes a 0-dim tensor, same value;
# a float at the kernel's dtype {dtype}, an int as int64, a bool as bool.)
class _KtlScalarOutputs{cls}({cls}):
    def forward(self, *args, **kwargs):
        import torch as _ktl_torch

        def tensor(value):
            if isinstance(value, bool):
                return _ktl_torch.tensor(value)
            if isinstance(value, int):
                return _ktl_torch.tensor(value, dtype=_ktl_torch.int64)
            if isinstance(value, float):
                return _ktl_torch.tensor(value, dtype=_ktl_torch.{dtype})
            return value

        out = super().forward(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(tensor(o) for o in out)
        return tensor(out)


{cls} = _KtlScalarOutputs{cls}
""".encode()


def solution_as_given(logged: bytes) -> bytes:
    """A logged solution file as its author gave it: `logged` less the scalar adapter this
    import appends (`scalar_adapter(TORCH_ENTRY, dtype)` for one of the torch dtypes, taken
    only where the file ends with exactly those bytes), so a suite row's `solution_sha256`
    is checked against the logged source."""
    for dtype in TORCH_DTYPES:
        tail = scalar_adapter(TORCH_ENTRY, dtype)
        if logged.endswith(tail):
            return logged[:-len(tail)]
    return logged


def default_name(problem: Path) -> str:
    """'local/<file stem>' in the kernel-name alphabet, e.g. 19_ReLU.py -> local/19_relu."""
    slug = _NAME_PART.sub("-", problem.stem.lower()).strip("-._")[:100] or "kernel"
    return f"local/{slug}"


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=True)


def manifest_text(name: str, opts: ImportOptions, runtime: str, dtype: str,
                  sources: Sequence[str], info: ProblemInfo) -> str:
    lines = [
        "# Written by `ktl import kernelbench`. The op is the reference module itself:",
        "# its sha256 and the torch version are recorded in every statement about it.",
        *([f"# sizes: {info.scale.describe()}"[:300]] if info.scale.scaled else []),
        f"# get_inputs() when imported (torch {info.torch_version}): "
        + "; ".join(t.describe() for t in info.inputs),
        # the init arguments are named where one is more than a number (a tuple, a list, ...)
        *(["# get_init_inputs(): " + "; ".join(t.describe() for t in info.init)[:300]]
          if any(t.kind == "value" for t in info.init) else []),
        "# outputs: " + "; ".join(t.describe() for t in info.outputs),
        *(["# numbers returned by forward are compared as 0-dim tensors (the lines added at "
           "the end of reference.py and solution.py)"]
          if any(t.kind == "scalar" for t in info.outputs) else []),
        f"name = {_toml_string(name)}",
        f"version = {_toml_string(opts.version)}",
        f"op = {_toml_string(TORCH_OP)}",
        f"runtime = {_toml_string(runtime)}",
        f"reference = {_toml_string(REFERENCE_FILE)}",
        f"solution = {_toml_string(SOLUTION_FILE)}",
        "sources = [" + ", ".join(_toml_string(s) for s in sources) + "]",
        f"entry = {_toml_string(TORCH_ENTRY)}",
        "flags = []",
        f"dtype = {_toml_string(dtype)}",
        "",
        "[generator]",
        f"agent = {_toml_string(opts.agent)}",
        f"agent_version = {_toml_string(opts.agent_version)}",
        f"model = {_toml_string(opts.model)}",
        "",
        "[target]",
        f"hardware_class = {_toml_string(opts.hardware_class)}",
        "",
    ]
    return "\n".join(lines)


def _check_out(out: Path) -> None:
    if out.exists() or out.is_symlink():
        if out.is_symlink() or not out.is_dir():
            raise ImportRefused(f"--out {out}: exists and is not a folder")
        if any(out.iterdir()):
            raise ImportRefused(f"--out {out}: exists and is not empty; give a new folder")
    if not out.parent.is_dir():
        raise ImportRefused(f"--out {out}: its parent folder does not exist")


def _extra_sources(paths: Sequence[Path]) -> dict[str, bytes]:
    if len(paths) > MAX_EXTRA_SOURCES:
        raise InputError(f"--source: at most {MAX_EXTRA_SOURCES} files")
    out: dict[str, bytes] = {}
    for path in paths:
        name = path.name
        if not name.endswith(_EXTRA_EXT) or name in (REFERENCE_FILE, SOLUTION_FILE, MANIFEST):
            raise InputError(f"--source {path}: must be a .cpp/.cu/.h/.py file not named "
                             f"{REFERENCE_FILE} or {SOLUTION_FILE}")
        if name in out:
            raise InputError(f"--source: two files named {name}")
        out[name] = _read(path, "--source")
    return out


def import_kernelbench(problem: Path, solution: Path, out: Path,
                       opts: ImportOptions | None = None) -> ImportResult:
    """Write the kernel folder `out` for a KernelBench problem and solution; see the module."""
    opts = opts or ImportOptions()
    _check_out(out)
    name = opts.name or default_name(problem)
    if not NAME_RE.fullmatch(name):
        raise InputError(f"--name {name!r}: must look like vendor/kernel-name "
                         "(lowercase letters, digits, . _ -)")
    if opts.dtype is not None and opts.dtype not in TORCH_DTYPES:
        raise InputError(f"--dtype {opts.dtype!r}: one of {', '.join(TORCH_DTYPES)}")
    problem_bytes = _read(problem, "problem")
    solution_bytes = _read(solution, "solution")
    extras = _extra_sources(opts.extra_sources)
    solution_runtime(solution_bytes)
    info = probe_problem(problem_bytes)
    runtime = opts.runtime or solution_runtime(solution_bytes, len(info.init))
    dtype = opts.dtype or info.dtype
    if any(t.kind == "scalar" for t in info.outputs):
        problem_bytes += scalar_adapter("Model", dtype)
        solution_bytes += scalar_adapter(TORCH_ENTRY, dtype)
    files = {REFERENCE_FILE: problem_bytes, SOLUTION_FILE: solution_bytes, **extras}
    text = manifest_text(name, opts, runtime, dtype, list(files), info)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        stage.chmod(0o755)
        for rel, data in files.items():
            (stage / rel).write_bytes(data)
        (stage / MANIFEST).write_text(text, encoding="utf-8")
        try:
            KernelSpec.load(stage)
        except KernelSpecError as exc:
            raise InputError(f"the folder would not be valid: {exc}") from exc
        if out.is_dir():
            out.rmdir()
        os.rename(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return ImportResult(out.resolve(), KernelSpec.load(out), info)
