"""The child side of `ktl import kernelbench`: run inside the sandbox, never in ktl's process.

Usage (in the sandbox's private folder): `python -I ktl_probe.py reference.py`. Imports the
problem file, checks that it defines `Model`, `get_inputs` and `get_init_inputs`, builds
the model, runs it once on `get_inputs()`, and prints one line
`KTL-PROBE {json}`: the inputs' and outputs' kinds, dtypes and shapes (bounded), or the
reason the problem cannot be mapped. The parent checks every field it reads.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from typing import Any

PREFIX = "KTL-PROBE "
MAX_ITEMS = 64
MAX_DIMS = 8


def _describe(value: Any, torch: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "dtype": str(value.dtype).removeprefix("torch."),
                "shape": [int(d) for d in value.shape[:MAX_DIMS + 1]]}
    if isinstance(value, bool):
        return {"kind": "scalar", "type": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "scalar", "type": "int", "value": max(min(value, 2**62), -2**62)}
    if isinstance(value, float):
        return {"kind": "scalar", "type": "float", "value": value}
    return {"kind": "other", "type": type(value).__name__[:64]}


def _items(value: Any) -> list[Any] | None:
    if isinstance(value, list | tuple):
        return list(value)
    return None


def probe(path: str) -> dict[str, Any]:
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return {"ok": False, "missing": "torch", "error": f"cannot import torch: {exc}"}
    spec = importlib.util.spec_from_file_location("reference", path)
    if spec is None or spec.loader is None:
        return {"ok": False, "error": "cannot load the problem file as a Python module"}
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        return {"ok": False, "error": f"importing the problem raised {type(exc).__name__}: {exc}"}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        return {"ok": False, "error": f"the problem does not define {', '.join(missing)}"}
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        return {"ok": False, "error": "Model is not a subclass of torch.nn.Module"}
    torch.manual_seed(0)
    stage = "get_init_inputs()"
    try:
        init = _items(module.get_init_inputs())
        if init is None:
            return {"ok": False, "error": "get_init_inputs() must return a list or tuple"}
        stage = "get_inputs()"
        inputs = _items(module.get_inputs())
        if inputs is None:
            return {"ok": False, "error": "get_inputs() must return a list or tuple"}
        stage = "Model(*get_init_inputs())"
        model = module.Model(*init)
        stage = "Model(...)(*get_inputs())"
        with torch.no_grad():
            result = model(*inputs)
    except Exception as exc:
        return {"ok": False, "error": f"{stage} raised {type(exc).__name__}: {exc}"}
    outputs = _items(result)
    return {
        "ok": True, "torch": str(torch.__version__),
        "init": [_describe(v, torch) for v in init[:MAX_ITEMS]], "init_count": len(init),
        "inputs": [_describe(v, torch) for v in inputs[:MAX_ITEMS]], "input_count": len(inputs),
        "outputs": [_describe(v, torch) for v in (outputs if outputs is not None else [result])
                    [:MAX_ITEMS]],
        "output_count": len(outputs) if outputs is not None else 1,
        "parameters": sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()}),
    }


def main() -> None:
    answer = probe(sys.argv[1])
    try:
        text = json.dumps(answer, allow_nan=False, default=str)
    except ValueError:
        text = json.dumps({"ok": False, "error": "a number the problem returns is not finite"})
    if len(text) > 60_000:
        text = json.dumps({"ok": False, "error": "the problem's description is too large"})
    sys.stdout.write(PREFIX + text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
