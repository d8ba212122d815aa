"""The driver of a torch kernel's processes: one script, three roles, no ktl import.

Run as ``python -s -B _torch_child.py ROLE CMD_FD ANS_FD MEM_FD MEM_BYTES FOLDER MODULE CLASS
THREADS EXT_DIR`` by `verifier.worker._torch` (never imported by the kernel's process as a
package: it loads nothing of ktl, so nothing of ktl's is there to patch):

- ``reference``: loads MODULE (the kernel folder's reference.py) and its ``Model``,
  ``get_inputs`` and ``get_init_inputs``; never the solution;
- ``candidate``: loads MODULE (solution.py) and its ``ModelNew``; ``load_inline`` and
  ``load`` are replaced by a loader of extensions the build step put in EXT_DIR (read-only
  here): the kernel's process never compiles;
- ``build``: imports the solution once with ``load_inline``/``load`` building into
  EXT_DIR (in the build sandbox's private folder), then exits.

Commands and answers are frames (4-byte little-endian length, UTF-8 JSON). Tensors never
travel in frames: the parent names regions of the shared memfd (offset, shape, dtype);
inputs are views of those regions, and each output is copied into the region the parent
chose for that call. The parent parses every answer strictly (`verifier.worker._torch`):
from the candidate they are the kernel's word.

The parent imports this module for its constants and framing only; torch is imported
in `main`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import mmap
import os
import struct
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

__all__ = ["DTYPES", "EXT_IGNORED_ARGS", "FRAME", "MAX_ANSWER", "MAX_COMMAND", "extension_key",
           "read_frame", "write_frame"]

FRAME = struct.Struct("<I")
MAX_COMMAND = 4 * 2**20
"""Largest command frame the parent sends (a batch of calls' regions)."""
MAX_ANSWER = 256 * 1024
"""Largest answer frame the parent reads; a longer one is a malformed answer."""
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "bool")
"""Tensor dtypes that may cross the shared memory (by name)."""
EXT_IGNORED_ARGS = ("build_directory", "verbose", "keep_intermediates")
"""`load_inline`/`load` arguments that do not change what is built."""
MAX_VIEWS = 4096
FORWARD_SEED = 20261206
"""torch's generator is seeded with this (or a call's own `seed`) before every one-thread call,
in both processes: a module that draws random numbers in forward (dropout in training mode,
as KernelBench's problems leave it) then draws the same ones in the reference, in its
float64 copy and in the candidate, so an honest copy of it gives the same answer."""


def read_frame(fd: int, limit: int) -> bytes:
    """One frame from `fd`; EOFError at its end, ValueError for a frame over `limit`."""
    head = _read(fd, FRAME.size)
    (size,) = FRAME.unpack(head)
    if size > limit:
        raise ValueError(f"frame of {size} bytes; the limit is {limit}")
    return _read(fd, size)


def _read(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def write_frame(fd: int, payload: bytes) -> None:
    data = FRAME.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def extension_key(kind: str, arguments: dict[str, Any]) -> str:
    """The folder name of one `load_inline`/`load` call's build: its digest over what it
    builds (sources, functions, flags; the contents of `load`'s source files)."""
    kept = {k: v for k, v in sorted(arguments.items()) if k not in EXT_IGNORED_ARGS}
    text = json.dumps([kind, kept], sort_keys=True, default=repr)
    name = str(arguments.get("name", "ext"))
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)[:40] or "ext"
    return f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


# -- extensions --------------------------------------------------------------------------------


def _bound(real: Any, args: tuple[Any, ...], kwargs: dict[str, Any], kind: str) -> dict[str, Any]:
    bound = inspect.signature(real).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    if kind == "load":
        files = arguments.get("sources")
        paths = [files] if isinstance(files, str) else list(files or [])
        digests = []
        for p in paths:
            with open(p, "rb") as fh:
                digests.append([str(p), hashlib.sha256(fh.read()).hexdigest()])
        arguments["sources"] = digests
    return arguments


def _install_extension_hooks(role: str, ext_dir: str) -> None:
    """Route `load_inline` and `load` through the build cache (see the module docstring)."""
    from torch.utils import cpp_extension

    for kind in ("load_inline", "load"):
        real = getattr(cpp_extension, kind)

        def hook(*args: Any, _real: Any = real, _kind: str = kind, **kwargs: Any) -> Any:
            arguments = _bound(_real, args, kwargs, _kind)
            key = extension_key(_kind, arguments)
            folder = os.path.join(ext_dir, key)
            name = str(arguments["name"])
            if role == "build":
                os.makedirs(folder, exist_ok=True)
                kwargs = {k: v for k, v in kwargs.items() if k not in ("build_directory", "verbose")}
                return _real(*args, build_directory=folder, verbose=False, **kwargs)
            return _import_built(folder, name, bool(arguments.get("is_python_module", True)))

        setattr(cpp_extension, kind, hook)


def _import_built(folder: str, name: str, is_python_module: bool) -> Any:
    import torch

    path = os.path.join(folder, name + ".so")
    if not os.path.isfile(path):
        raise ImportError(f"extension {name!r} was not built by ktl's build step (a load_inline "
                          "call whose arguments differ between the build and the run?)")
    if not is_python_module:
        torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        return path
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the extension {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- serving -----------------------------------------------------------------------------------


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A plain value as JSON; a tuple is tagged {"tuple": [...]} so `_plain` gives it back as
    a tuple (a module may test isinstance(x, tuple)), a dict {"dict": [[k, v], ...]}."""
    if depth > 8:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_jsonable(v, depth + 1) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": [[k, _jsonable(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__} cannot be passed between processes")


def _plain(value: Any, depth: int = 0) -> Any:
    """The value `_jsonable` encoded, as the problem gave it."""
    if depth > 8:
        raise TypeError("nested too deeply")
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict) and list(value) == ["tuple"] and isinstance(value["tuple"], list):
        return tuple(_plain(v, depth + 1) for v in value["tuple"])
    if isinstance(value, dict) and list(value) == ["dict"] and isinstance(value["dict"], list):
        return {str(k): _plain(v, depth + 1) for k, v in value["dict"]}
    return value


class _DeviceSync:
    """The device's synchronise, bound before the kernel's module is loaded: a module that
    patches `torch.cuda.synchronize` or the stream's methods (tests/gpu_attackers/
    sidestream.py made the first a no-op, so this loop answered a batch early) is not on
    this path. `batch` synchronises the default stream (the one every call is launched on),
    then the whole device, and answers how long the second still waited: work left on
    another stream. (The parent trusts neither: its clock and the outputs it reads decide;
    a gap is this process accusing itself, which it could only hide.)"""

    def __init__(self, torch: Any) -> None:
        cuda = getattr(torch, "cuda", None)
        self.ok = bool(cuda is not None and cuda.is_available())
        self.initialized = getattr(cuda, "is_initialized", None)
        self.device_sync = getattr(cuda, "synchronize", None)
        self.default_stream = getattr(cuda, "default_stream", None)
        self.stream_sync = getattr(getattr(cuda, "Stream", None), "synchronize", None)
        self.clock = time.perf_counter_ns

    def live(self) -> bool:
        return self.ok and self.initialized is not None and bool(self.initialized())

    def all(self) -> None:
        if self.live() and self.device_sync is not None:
            self.device_sync()

    def batch(self) -> int | None:
        """The ns the device-wide synchronise waited after the default stream's (None: no
        CUDA here)."""
        if not (self.live() and self.device_sync is not None and self.default_stream is not None
                and self.stream_sync is not None):
            return None
        self.stream_sync(self.default_stream())
        t0 = self.clock()
        self.device_sync()
        return max(self.clock() - t0, 0)


class _Server:
    def __init__(self, role: str, mem: Any, module: Any, cls_name: str,
                 sync: _DeviceSync) -> None:
        import torch

        self.torch = torch
        self.sync = sync
        self.role = role
        self.mem = mem
        self.module = module
        self.cls = getattr(module, cls_name)
        self.model: Any = None
        self.exact: Any = None
        self.exact_error = "the module was not initialised"
        self.views: dict[tuple[int, str, tuple[int, ...]], Any] = {}
        self.device = "cpu"
        self.staged: list[list[Any]] = []
        self.results: list[Any] = []
        self.flush: Any = None
        self.tiny: Any = None
        self.last_drawn: dict[int, Any] = {}

    def dtype(self, name: str) -> Any:
        if name not in DTYPES:
            raise ValueError(f"dtype {name!r}")
        return getattr(self.torch, name)

    def view(self, offset: int, dtype: str, shape: list[int]) -> Any:
        key = (offset, dtype, tuple(shape))
        hit = self.views.get(key)
        if hit is None:
            count = 1
            for d in shape:
                count *= d
            flat = self.torch.frombuffer(self.mem, dtype=self.dtype(dtype), count=count,
                                         offset=offset) if count else \
                self.torch.empty(0, dtype=self.dtype(dtype))
            hit = flat.view(shape)
            if len(self.views) < MAX_VIEWS:
                self.views[key] = hit
        return hit

    def describe(self) -> dict[str, Any]:
        torch = self.torch
        init = _jsonable(list(self.module.get_init_inputs()))
        described = []
        for item in self.module.get_inputs():
            if isinstance(item, torch.Tensor):
                name = str(item.dtype).removeprefix("torch.")
                if name not in DTYPES:
                    raise TypeError(f"get_inputs returns a {name} tensor")
                sample = item.detach().to("cpu", torch.float64) if item.numel() else None
                stats = {} if sample is None else {
                    "min": float(sample.min()), "max": float(sample.max()),
                    "mean": float(sample.mean()), "std": float(sample.std()) if item.numel() > 1 else 0.0,
                    "integral": bool(torch.equal(sample, sample.round()))}
                described.append({"kind": "tensor", "shape": list(item.shape), "dtype": name, **stats})
            else:
                described.append({"kind": "value", "value": _jsonable(item)})
        return {"init": init, "inputs": described}

    def init(self, cmd: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        torch.manual_seed(int(cmd["seed"]))
        model = self.cls(*_plain(list(cmd["init"])))
        if cmd.get("dtype"):
            model = model.to(self.dtype(cmd["dtype"]))
        if cmd.get("device") and isinstance(model, torch.nn.Module):
            self.device = str(cmd["device"])
            model = model.to(self.device)
        self.model = model
        self.views.clear()
        state = model.state_dict() if isinstance(model, torch.nn.Module) else {}
        if self.role == "reference":
            self._exact_copy(model)
            return {"params": self._write_state(state, int(cmd["params_at"]), int(cmd["room"]))}
        loaded, unmatched = 0, list[str]()
        given = {p["name"]: p for p in cmd.get("params", [])}
        with torch.no_grad():
            for name, tensor in state.items():
                p = given.get(name)
                if p is not None and list(tensor.shape) == p["shape"] and \
                        str(tensor.dtype).removeprefix("torch.") == p["dtype"]:
                    tensor.copy_(self.view(p["offset"], p["dtype"], p["shape"]))
                    loaded += 1
                elif len(unmatched) < 32:
                    unmatched.append(name[:100])
        return {"loaded": loaded, "own": len(state), "unmatched": unmatched}

    def compile(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """torch.compile the module (the reference only: a second baseline)."""
        if self.role != "reference":
            raise PermissionError("only the reference is compiled")
        # The sandbox denies sockets. Inductor names its cache folder after the user, and
        # glibc's user lookup asks nscd over a socket (the reference was killed at its first
        # compiled call): the cache goes to this run's private folder and the user's name is
        # given, so nothing is looked up. Compiling stays in this process (no worker pool).
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "inductor")
        os.environ.setdefault("USER", "ktl-reference")
        from torch._inductor import config

        config.compile_threads = 1
        self.model = self.torch.compile(self.model)
        return {}

    def _write_state(self, state: dict[str, Any], at: int, room: int) -> list[dict[str, Any]]:
        torch = self.torch
        out, pos = [], at
        for name, tensor in state.items():
            dname = str(tensor.dtype).removeprefix("torch.")
            if dname not in DTYPES:
                continue
            nbytes = tensor.numel() * tensor.element_size()
            if pos + nbytes > at + room:
                raise MemoryError(f"the reference's parameters need more than {room} bytes")
            if nbytes:
                dst = torch.frombuffer(self.mem, dtype=tensor.dtype, count=tensor.numel(), offset=pos)
                dst.copy_(tensor.detach().reshape(-1).cpu())
            out.append({"name": name, "shape": list(tensor.shape), "dtype": dname, "offset": pos})
            pos += (nbytes + 63) // 64 * 64
        return out

    def args(self, spec: list[Any]) -> list[Any]:
        out = []
        for a in spec:
            if "t" in a:
                offset, shape, dtype = a["t"]
                out.append(self.view(offset, dtype, shape))
            else:
                out.append(_plain(a["v"]))
        return out

    def call_args(self, spec: list[Any]) -> list[Any]:
        """A call's inputs where the module is: the arena's views, copied to the device the
        module was moved to by `init` (a module on "cuda" cannot take host tensors)."""
        args = self.args(spec)
        if self.device == "cpu":
            return args
        return [a.to(self.device) if isinstance(a, self.torch.Tensor) else a for a in args]

    def _exact_copy(self, model: Any) -> None:
        """The module in float64 with the same (dtype-rounded) weights: the answer a
        correctness check compares with (`exact_call`)."""
        import copy

        self.exact = None
        try:
            self.exact = copy.deepcopy(model).to(self.torch.float64)
        except Exception as exc:  # the reason is the parent's to record
            self.exact_error = f"{type(exc).__name__}: {exc}"[:300]

    def exact_call(self, call: dict[str, Any]) -> list[Any]:
        """One call of the float64 module on the inputs widened to float64, each floating
        output rounded (to nearest) to the dtype the parent names in `as`: the op's answer
        at its dtype, without the rounding errors of computing it there."""
        torch = self.torch
        if self.role != "reference":
            raise PermissionError("only the reference computes in float64")
        if self.exact is None:
            raise RuntimeError(f"no float64 copy of the module: {self.exact_error}")
        args = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point()
                else a for a in self.call_args(call["in"])]
        torch.manual_seed(int(call.get("seed", FORWARD_SEED)))
        with torch.no_grad():
            result = self.exact(*args)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        kinds = list(call.get("as", []))
        rounded = [o.to(self.dtype(kinds[i])) if isinstance(o, torch.Tensor) and
                   o.is_floating_point() and i < len(kinds) else o for i, o in enumerate(outs)]
        return self.write_outputs(rounded, call["out"])

    def one_call(self, call: dict[str, Any], seeded: bool = True) -> list[Any]:
        """One call of the module (seeded first, `FORWARD_SEED`, unless two threads share
        torch's generator: `_pair`)."""
        torch = self.torch
        args = self.call_args(call["in"])
        if seeded:
            torch.manual_seed(int(call.get("seed", FORWARD_SEED)))
        with torch.no_grad():
            result = self.model(*args)
        return self.write_outputs(result, call["out"])

    def write_outputs(self, result: Any, regions: list[Any]) -> list[Any]:
        """Copy a call's outputs into the regions the parent chose; describe each."""
        torch = self.torch
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        described = []
        for i, o in enumerate(outs):
            if type(o) is not torch.Tensor:
                return [{"bad": f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, "
                                "not a torch.Tensor"}]
            name = str(o.dtype).removeprefix("torch.")
            nbytes = o.numel() * o.element_size()
            if name not in DTYPES or i >= len(regions) or nbytes > regions[i][1]:
                described.append([list(o.shape), name, False])
                continue
            if nbytes:
                dst = torch.frombuffer(self.mem, dtype=o.dtype, count=o.numel(), offset=regions[i][0])
                dst.copy_(o.detach().reshape(-1))
            described.append([list(o.shape), name, True])
        return described

    def calls(self, cmd: dict[str, Any]) -> dict[str, Any]:
        calls = cmd["calls"]
        if cmd.get("threads", 1) == 2:
            return self._pair(calls)
        each = self.exact_call if cmd.get("exact") else self.one_call
        answers = [each(c) for c in calls]
        self._sync()
        return {"outs": answers if cmd.get("report", True) else len(answers)}

    # -- device batches: staged once per shape, run, fetched (verifier.benchmark._device_bench)

    def stage(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Copy each call's inputs into that call's own buffers on the device, allocating a
        buffer only where the shape or dtype changed (so buffers live once per shape). An
        argument `{"g": [shape, dtype, dist, a, b]}` is drawn on the device instead, from
        the command's `seed` (both processes draw the same bytes: `_draw`)."""
        torch = self.torch
        dev = torch.device(str(cmd.get("device", "cpu")))
        gen = None
        if "seed" in cmd:
            gen = torch.Generator(device=dev)
            gen.manual_seed(int(cmd["seed"]))
        fresh = 0
        for i, call in enumerate(cmd["calls"]):
            if i == len(self.staged):
                self.staged.append([])
            row = self.staged[i]
            del row[len(call["in"]):]
            for j, a in enumerate(call["in"]):
                if j == len(row):
                    row.append(None)
                src = self._draw(a["g"], gen, dev) if "g" in a else self.args([a])[0]
                if not isinstance(src, torch.Tensor):
                    row[j] = src
                    continue
                slot = row[j]
                if not (isinstance(slot, torch.Tensor) and slot.shape == src.shape
                        and slot.dtype == src.dtype and slot.device == dev):
                    slot = torch.empty(src.shape, dtype=src.dtype, device=dev)
                    row[j] = slot
                    fresh += 1
                if "g" in a:  # against the previous call's, before a one-call batch's
                    self._differ(j, src)  # slot (the same buffer) is overwritten
                slot.copy_(src)
                if "g" in a:
                    self.last_drawn[j] = slot
        self.device = str(dev)
        self._sync()
        return {"allocated": fresh}

    def _draw(self, spec: list[Any], gen: Any, dev: Any) -> Any:
        """One argument drawn on the device as `verifier.benchmark._torch_pool` draws it on
        the host: normal (mean a, std b), half-normal from a (|normal| times b) or uniform
        in [0, 1), in float32, then cast to its dtype."""
        torch = self.torch
        if gen is None:
            raise ValueError("a drawn argument needs the command's seed")
        shape, dtype, dist, a, b = spec
        if dist == "uniform":
            x = torch.rand(shape, generator=gen, device=dev, dtype=torch.float32)
        else:
            x = torch.randn(shape, generator=gen, device=dev, dtype=torch.float32)
            if dist == "halfnormal":
                x.abs_()
            x.mul_(float(b)).add_(float(a))
        return x.to(self.dtype(dtype))

    def _differ(self, j: int, drawn: Any) -> None:
        """Every element of `drawn` differs from the same element of the previous call's
        argument `j` (the lowest bit flipped where they are equal), across batches too."""
        torch = self.torch
        last = self.last_drawn.get(j)
        if last is not None and last.shape == drawn.shape and last.dtype == drawn.dtype:
            same = drawn == last
            ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[drawn.element_size()]
            bits = drawn.view(ints)
            bits[same] = bits[same] ^ 1

    def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Run staged calls 0..count-1, each keeping its own outputs (an L2 flush before each
        when cold; a one-element add instead when empty); synchronise the device; answer."""
        torch = self.torch
        count, cold, empty = int(cmd["count"]), bool(cmd.get("cold")), bool(cmd.get("empty"))
        if cold and (self.flush is None or self.flush.numel() < int(cmd["flush_bytes"])):
            self.flush = torch.empty(int(cmd["flush_bytes"]), dtype=torch.uint8, device=self.device)
        if self.tiny is None or str(self.tiny.device) != self.device:
            self.tiny = torch.zeros(1, device=self.device)
        events = bool(cmd.get("events")) and self.device.startswith("cuda")
        marks, results = [], []
        with torch.no_grad():
            for i in range(count):
                if cold:
                    self.flush.fill_(i & 0xFF)
                if events:
                    marks.append((torch.cuda.Event(enable_timing=True),
                                  torch.cuda.Event(enable_timing=True)))
                    marks[-1][0].record()
                if empty:
                    self.tiny.add_(1.0)
                else:
                    results.append(self.model(*self.staged[i]))
                if events:
                    marks[-1][1].record()
        gap = None if empty else self.sync.batch()
        self._sync()
        answer: dict[str, Any] = {} if gap is None else {"stream_gap_ns": gap}
        if not empty:
            self.results = results
        if marks:
            answer["events"] = [a.elapsed_time(b) * 1e6 for a, b in marks]
        return answer

    def fetch(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The outputs of the last batch's calls the parent picked, copied to its regions."""
        answers = []
        for index, regions in zip(cmd["calls"], cmd["out"], strict=True):
            answers.append(self.write_outputs(self.results[int(index)], regions))
        return {"outs": answers}

    def _pair(self, calls: list[Any]) -> dict[str, Any]:
        halves = [calls[0::2], calls[1::2]]
        results: list[list[Any]] = [[], []]
        times: list[list[int]] = [[], []]
        errors: list[str] = []
        barrier = threading.Barrier(2)

        def run(k: int) -> None:
            try:
                barrier.wait()
                for c in halves[k]:
                    t0 = time.monotonic_ns()
                    results[k].append(self.one_call(c, seeded=False))
                    times[k] += [t0, time.monotonic_ns()]
            except BaseException as exc:  # the error is the answer
                errors.append(f"{type(exc).__name__}: {exc}"[:1000])

        threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # hand the interpreter over often, so the calls interleave
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            sys.setswitchinterval(interval)
        if errors:
            raise RuntimeError(errors[0])
        self._sync()
        merged = [r for pair in zip(results[0], results[1], strict=False) for r in pair]
        return {"outs": merged, "times": times}

    def _sync(self) -> None:
        self.sync.all()


def _load_module(folder: str, path: str) -> Any:
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("ktl_kernel_module", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ktl_kernel_module"] = module
    spec.loader.exec_module(module)
    return module


def _error(exc: BaseException) -> dict[str, Any]:
    tail = traceback.format_exception(exc)[-3:]
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:1000], "trace": "".join(tail)[-1500:]}


class _FrameIO:
    """The command loop's reads and writes, bound before the module is loaded: a module
    that rewrites this script's names (`import __main__`; round 4 wrapped `read_frame` to
    slow the empty command that calibrates every batch) or `os`'s and `json`'s attributes
    is not on the loop's path. (Not a defence of the measurement, which never trusts this
    process: the parent caps the calibration at the baseline's own.)"""

    def __init__(self, cmd_fd: int, ans_fd: int) -> None:
        self.cmd_fd, self.ans_fd = cmd_fd, ans_fd
        self._read, self._write = os.read, os.write
        self._loads, self._dumps, self._pack = json.loads, json.dumps, FRAME.pack
        self._unpack = FRAME.unpack

    def command(self) -> Any:
        (size,) = self._unpack(self._exactly(FRAME.size))
        if size > MAX_COMMAND:
            raise ValueError(f"frame of {size} bytes; the limit is {MAX_COMMAND}")
        return self._loads(self._exactly(size))

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self._read(self.cmd_fd, n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def answer(self, body: dict[str, Any]) -> None:
        payload = self._dumps(body, allow_nan=True).encode()
        view = memoryview(self._pack(len(payload)) + payload)
        while view:
            view = view[self._write(self.ans_fd, view):]


def main(argv: list[str]) -> int:
    role, cmd_fd, ans_fd, mem_fd, nbytes, folder, path, cls_name, threads, ext_dir = (
        argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]), argv[6], argv[7],
        argv[8], int(argv[9]), argv[10])
    import torch

    torch.set_num_threads(threads)
    io = _FrameIO(cmd_fd, ans_fd)
    sync = _DeviceSync(torch)
    if role in ("candidate", "build"):
        _install_extension_hooks(role, ext_dir)
    try:
        module = _load_module(folder, path)
    except BaseException as exc:
        if role == "build":
            traceback.print_exc()
            return 3
        io.answer({**_error(exc), "stage": "load"})
        return 3
    if role == "build":
        return 0
    mem = mmap.mmap(mem_fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        server = _Server(role, mem, module, cls_name, sync)
    except AttributeError as exc:
        io.answer({**_error(exc), "stage": "load"})
        return 3
    io.answer({"ok": True, "ready": True, "torch": torch.__version__})
    handlers = {"describe": lambda c: server.describe(), "init": server.init,
                "call": server.calls, "nop": lambda c: {}, "compile": server.compile,
                "stage": server.stage, "run": server.run, "fetch": server.fetch}
    while True:
        try:
            cmd = io.command()
        except EOFError:
            return 0
        if cmd.get("cmd") == "quit":
            return 0
        try:
            handler: Any = handlers[cmd["cmd"]]
            body = {"ok": True, **handler(cmd)}
        except Exception as exc:  # the model's failure is the answer
            body = _error(exc)
        io.answer(body)


if __name__ == "__main__":
    _code = main(sys.argv)
    # the interpreter's teardown with torch loaded takes about half a second a process (a
    # second a session, a run, a check's restart) and nothing of it is wanted here: the
    # output flushed, the process ends at once; a kernel's atexit work never runs
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
