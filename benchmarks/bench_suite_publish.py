"""The cost of logging a suite run as one claim, and of checking it, against a real log.

    .venv/bin/python benchmarks/bench_suite_publish.py [--problems 100]

Lays out a finished `ktl suite run` of --problems correct, benchmarked problems (each a
torch kernel folder as `ktl import kernelbench` writes it, under its suite name, with
prepared check and bench outputs: what is measured is publishing and verifying, not
checking), serves a fresh log on 127.0.0.1, then times `ktl suite publish` (3 entries a
problem, then the suite statement), `ktl suite verify` (every named entry fetched with its
inclusion proof and checked, and each kernel's source archive for its solution file), and the same
publish again (resumed: every entry comes back a duplicate). Prints the figures and the
suite statement's size as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Runnable without installing the project: the repository root goes on sys.path.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

from werkzeug.serving import make_server  # noqa: E402

from attest import examples  # noqa: E402
from attest.keys import generate_private_key, save_private_key  # noqa: E402
from client.api import LogClient  # noqa: E402
from client.suite import EntryResult, kernel_name_of  # noqa: E402
from ledger.server import ServerConfig, create_app  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.ERROR)


SOLUTION = b"import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
MANIFEST = """name = "{name}"
version = "0.1.0"
op = "torch"
runtime = "torch"
reference = "reference.py"
solution = "solution.py"
sources = ["reference.py", "solution.py"]
entry = "ModelNew"
flags = []
dtype = "float32"

[generator]
agent = "unknown"
agent_version = "0"
model = "unknown"

[target]
hardware_class = "cpu"
"""


def _torch_kernel(folder: Path, name: str) -> None:
    """A kernel folder as `ktl import kernelbench` writes it (its sources are not run here:
    what is measured is publishing and verifying, the logged solution file included)."""
    folder.mkdir(parents=True)
    (folder / "kernel.toml").write_text(MANIFEST.format(name=name))
    (folder / "reference.py").write_bytes(SOLUTION.replace(b"ModelNew", b"Model"))
    (folder / "solution.py").write_bytes(SOLUTION)


def _evidence() -> dict[str, Any]:
    bench = examples.benchmark_runs((2.1, 2.1, 2.1))
    bench["workload"]["op"] = "torch"
    bench["results"][0]["speedup_ci95"] = [1.95, 2.3]
    run = {"op": bench["workload"]["op"], "shapes": [
        {"shape": bench["results"][0]["shape"], "kernel_ns": [1000.0] * 50,
         "baseline_ns": [2100.0] * 50}]}
    samples = json.dumps({"runs": [run] * 3}, sort_keys=True, separators=(",", ":")).encode()
    bench["samples"] = {"sha256": hashlib.sha256(samples).hexdigest(), "size": len(samples),
                        "media_type": "application/json"}
    return {"verification": examples.verification(), "benchmark": bench,
            "samples": samples.decode()}


def lay_out(root: Path, n: int) -> tuple[Path, Path]:
    """Problems and a finished suite --out folder of `n` correct, benchmarked problems."""
    problems, out = root / "problems", root / "out"
    (problems / "level1").mkdir(parents=True)
    ev = _evidence()
    for i in range(1, n + 1):
        stem = f"{i}_Problem_number_{i}"
        key, file_key = f"level1/{stem}", f"level1__{stem}"
        (problems / "level1" / f"{stem}.py").write_text(f"# problem {i}\n")
        _torch_kernel(out / "kernels" / file_key, kernel_name_of(key))
        folder = out / "evidence" / file_key
        folder.mkdir(parents=True)
        (folder / "verification.json").write_text(json.dumps(ev["verification"]))
        (folder / "benchmark.json").write_text(json.dumps(ev["benchmark"]))
        (folder / "samples.json").write_text(ev["samples"])
        result = EntryResult(key, 1, i, "correct", "done", speedup=2.1, trusted=True,
                             solution_sha256=hashlib.sha256(SOLUTION).hexdigest())
        (out / "entries").mkdir(exist_ok=True)
        (out / "entries" / f"{file_key}.json").write_text(json.dumps(result.to_json()))
    return problems, out


def _ktl(home: Path, url: str, *args: str) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "KTL_HOME": str(home), "KTL_LOG": url, "KTL_LOG_KEY": ""}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args,
                           "--json"], capture_output=True, text=True, env=env, timeout=3600)
    took = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"ktl {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    body: dict[str, Any] = json.loads(done.stdout)
    return took, body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=100)
    ap.add_argument("--tiny", action="store_true", help="a smoke run of a few seconds")
    args = ap.parse_args()
    n = 3 if args.tiny else args.problems
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        problems, out = lay_out(root, n)
        key = root / "vendor.key"
        save_private_key(key, generate_private_key())
        app = create_app(ServerConfig(data_dir=str(root / "log"), origin="127.0.0.1/bench",
                                      batch_delay_ms=1.0))
        srv = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.server_port}"
        try:
            publish = ("suite", "publish", str(out), "--problems", str(problems), "--key",
                       str(key))
            first, report = _ktl(root / "home", url, *publish)
            index = report["suite"]["index"]
            check, verified = _ktl(root / "home", url, "suite", "verify", "--index", str(index))
            again, _ = _ktl(root / "home", url, *publish)
            size = len(LogClient(url).entry(index).entry_bytes)
        finally:
            srv.shutdown()
            app.extensions["ktl"].close()
    print(json.dumps({"problems": n, "entries_named": verified["checked_entries"],
                      "statement_bytes": size, "publish_s": round(first, 1),
                      "verify_s": round(check, 1), "publish_again_s": round(again, 1),
                      "load_average": round(os.getloadavg()[0], 1)}))


if __name__ == "__main__":
    main()
