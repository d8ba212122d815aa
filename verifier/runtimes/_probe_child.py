"""The child side of a problem probe: run inside the sandbox, never in ktl's process.

Usage (in the sandbox's private folder, `ktl_sizes.py` beside it): `python -I ktl_probe.py
reference.py BUDGET_JSON`. Reads the problem's module-level size constants; measures one
call at the problem's own sizes on torch's `meta` device (shapes, dtypes, bytes and the
matmul/convolution FLOPs, with nothing allocated); where that does not fit the budget,
finds smaller values of the constants that do (`ktl_sizes.scale_plan`), and measures each
constant alone set past 4,608 (`past_blocks`, for the check's dimension variants); then builds the
model and runs it once for real at the values chosen, and prints one line
`KTL-PROBE {json}`. The parent checks every field it reads.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
from collections.abc import Mapping
from typing import Any

if __name__ == "__main__":  # the sandbox's script: `ktl_sizes.py` lies beside it (-I leaves
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its folder off the path)
    import ktl_sizes  # type: ignore[import-not-found]
else:  # imported by ktl's tests
    from verifier.runtimes import _sizes as ktl_sizes

PREFIX = "KTL-PROBE "
MAX_ITEMS = 64
MAX_DIMS = 8
MAX_DEPTH = 6
MAX_TEXT = 200
META_FORWARD_OK = [False]
"""Whether the forward ran on the meta device at the problem's own sizes."""


def plain(value: Any, depth: int = 0) -> Any:
    """A plain value as JSON: tuples tagged {"tuple": [...]}, so they are passed back as given."""
    if depth > MAX_DEPTH:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(min(value, 2**62), -2**62)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value[:MAX_ITEMS]]
    if isinstance(value, tuple):
        return {"tuple": [plain(v, depth + 1) for v in value[:MAX_ITEMS]]}
    raise TypeError(f"a {type(value).__name__}")


def describe(value: Any, torch: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "dtype": str(value.dtype).removeprefix("torch."),
                "shape": [int(d) for d in value.shape[:MAX_DIMS + 1]]}
    if isinstance(value, bool):
        return {"kind": "scalar", "type": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "scalar", "type": "int", "value": max(min(value, 2**62), -2**62)}
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return {"kind": "scalar", "type": "float", "value": value}
    try:
        return {"kind": "value", "type": type(value).__name__[:64], "value": plain(value)}
    except TypeError:
        return {"kind": "other", "type": type(value).__name__[:64]}


def items(value: Any) -> list[Any] | None:
    return list(value) if isinstance(value, list | tuple) else None


def load(source: bytes, values: Mapping[str, Any]) -> types.ModuleType:
    text = ktl_sizes.rewrite_constants(source, dict(values))
    module = types.ModuleType("reference")
    module.__file__ = "reference.py"
    sys.modules["reference"] = module
    exec(compile(text, "reference.py", "exec"), module.__dict__)  # the sandbox holds it
    return module


def nbytes(values: list[Any], torch: Any) -> int:
    return sum(int(v.numel()) * int(v.element_size()) for v in values
               if isinstance(v, torch.Tensor))


def built_then_meta(source: bytes, values: Mapping[str, Any], torch: Any) -> Any:
    """(model, inputs) for a module that cannot be built on the meta device (its constructor
    reads a value: Swin's drop-path schedule calls `.item()`): built on the CPU, its weights
    then moved to meta, the inputs made on meta (nothing of a call allocated); None if that
    fails too."""
    try:
        module = load(source, values)
        init = items(module.get_init_inputs()) or []
        model = module.Model(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to("meta")
        with torch.device("meta"):
            inputs = items(module.get_inputs()) or []
    except Exception:
        return None
    return model, inputs


def footprint(source: bytes, values: Mapping[str, Any], torch: Any) -> Any:
    """One call on the meta device: (Footprint, outputs estimated?) or None."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        module = load(source, values)
        with torch.device("meta"):
            init = items(module.get_init_inputs()) or []
            inputs = items(module.get_inputs()) or []
            model = module.Model(*init)
    except Exception:
        built = built_then_meta(source, values, torch)
        if built is None:
            return None
        model, inputs = built
    state = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    params = nbytes(list(state), torch)
    ins = nbytes(inputs, torch)
    if isinstance(model, torch.nn.Module) and any(
            isinstance(m, torch.nn.RNNBase) for m in model.modules()):
        # recurrent layers run step by step on meta (a minute and a half for a 6-layer GRU
        # over 512 steps): estimated, as for an op without a meta kernel
        return ktl_sizes.Footprint(4 * ins, params, 0), True
    try:
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            result = model(*inputs)
        outs = items(result) if items(result) is not None else [result]
        if not values:
            META_FORWARD_OK[0] = True
        return ktl_sizes.Footprint(ins + nbytes(outs or [], torch), params,
                                   int(counter.get_total_flops())), False
    except Exception:
        if values and META_FORWARD_OK[0]:
            return None  # it ran on meta at its own sizes: the rewrite is what it rejects
        # some ops have no meta kernel: the output is taken as large as the inputs
        return ktl_sizes.Footprint(2 * ins, params, 0), True


def run_real(source: bytes, values: Mapping[str, Any], torch: Any) -> dict[str, Any]:
    module = load(source, values)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        return {"ok": False, "error": f"the problem does not define {', '.join(missing)}"}
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        return {"ok": False, "error": "Model is not a subclass of torch.nn.Module"}
    torch.manual_seed(0)
    stage = "get_init_inputs()"
    try:
        init = items(module.get_init_inputs())
        if init is None:
            return {"ok": False, "error": "get_init_inputs() must return a list or tuple"}
        stage = "get_inputs()"
        inputs = items(module.get_inputs())
        if inputs is None:
            return {"ok": False, "error": "get_inputs() must return a list or tuple"}
        stage = "Model(*get_init_inputs())"
        model = module.Model(*init)
        stage = "Model(...)(*get_inputs())"
        with torch.no_grad():
            result = model(*inputs)
    except Exception as exc:
        return {"ok": False, "stage": stage,
                "error": f"{stage} raised {type(exc).__name__}: {str(exc)[:400]}"}
    outputs = items(result)
    return {
        "ok": True, "torch": str(torch.__version__),
        "init": [describe(v, torch) for v in init[:MAX_ITEMS]], "init_count": len(init),
        "inputs": [describe(v, torch) for v in inputs[:MAX_ITEMS]], "input_count": len(inputs),
        "outputs": [describe(v, torch) for v in (outputs if outputs is not None else [result])
                    [:MAX_ITEMS]],
        "output_count": len(outputs) if outputs is not None else 1,
        "parameters": sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()}),
    }


def past_blocks(source: bytes, constants: Any, plan: Any, torch: Any) -> dict[str, Any]:
    """One call's footprint with each size constant alone set past `PAST_BLOCKS` (the others
    as planned), on the meta device: the check's dimension variants (`_torch_dims`) start
    only those that fit. None where the problem does not run there."""
    out: dict[str, Any] = {}
    run_at = plan.run_values()
    for c in constants[:MAX_ITEMS]:
        v = run_at.get(c.name)
        if not c.shrinkable or not isinstance(v, int) or v + 1 >= ktl_sizes.PAST_BLOCKS:
            continue
        got = footprint(source, {**plan.values, c.name: ktl_sizes.PAST_BLOCKS}, torch)
        out[c.name] = got[0].to_json() if got is not None else None
    return out


def probe(path: str, budget_text: str) -> dict[str, Any]:
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return {"ok": False, "missing": "torch", "error": f"cannot import torch: {exc}"}
    with open(path, "rb") as f:
        source = f.read()
    try:
        constants = ktl_sizes.size_constants(source)
    except ktl_sizes.SizesError as exc:
        return {"ok": False, "error": str(exc)}
    b = json.loads(budget_text)
    budget = ktl_sizes.Footprint(int(b["call_bytes"]), int(b["param_bytes"]), int(b["flops"]))
    hard = b.get("hard") or b
    ceiling = ktl_sizes.Footprint(int(hard["call_bytes"]), int(hard["param_bytes"]),
                                  int(hard["flops"]))
    estimated = [False]

    def measure(values: Mapping[str, Any]) -> Any:
        got = footprint(source, values, torch)
        if got is None:
            return None
        estimated[0] = got[1]
        return got[0]

    plan = ktl_sizes.scale_plan(constants if b.get("scale", True) else (), measure, budget)
    if not b.get("scale", True):
        plan = ktl_sizes.ScalePlan({}, ktl_sizes.published_values(constants), plan.footprint,
                                   plan.published_footprint)
    past = past_blocks(source, constants, plan, torch) if b.get("scale", True) else {}
    sizes = {"constants": [c.to_json() for c in constants], "plan": plan.to_json(),
             "past": past,
             "fits": plan.footprint is None or plan.footprint.fits(budget)
             or plan.footprint.fits(ceiling),
             "estimated": estimated[0]}
    sys.stdout.write("KTL-SIZES " + json.dumps(sizes, default=str) + "\n")
    sys.stdout.flush()
    if not sizes["fits"]:
        return {"ok": False, "too_large": True, "error": "does not fit the budget", **sizes}
    try:
        answer = run_real(source, plan.values, torch)
    except MemoryError:
        return {"ok": False, "too_large": True, "error": "MemoryError", **sizes}
    except Exception as exc:
        return {"ok": False, "error": f"importing the problem raised {type(exc).__name__}: "
                                      f"{str(exc)[:400]}", **sizes}
    return {**answer, **sizes}


def main() -> None:
    answer = probe(sys.argv[1], sys.argv[2])
    try:
        text = json.dumps(answer, allow_nan=False, default=str)
    except ValueError:
        text = json.dumps({"ok": False, "error": "a number the problem returns is not finite"})
    if len(text) > 200_000:
        text = json.dumps({"ok": False, "error": "the problem's description is too large"})
    sys.stdout.write(PREFIX + text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
