"""Helpers for the client's end-to-end tests: a real log server on 127.0.0.1 and the real `ktl`.

The server is `ledger.server.create_app` on its SQLite data folder, served by
werkzeug on a free port in a thread, and closed (integrator included) on exit.
`ktl` runs through click's CliRunner on `client.cli.main` with its own $KTL_HOME.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from werkzeug.serving import make_server

from attest import examples
from client.cli import main
from ledger.server import ServerConfig, create_app

logging.getLogger("werkzeug").setLevel(logging.ERROR)

ORIGIN = "127.0.0.1/ktl-test"
REPO = Path(__file__).resolve().parent.parent


@contextmanager
def running_log(data_dir: Path, origin: str = ORIGIN, port: int = 0, **config: Any
                ) -> Iterator[str]:
    """Serve the log in `data_dir` on 127.0.0.1 (`port`, 0: a free one); yield its base URL."""
    app = create_app(ServerConfig(data_dir=str(data_dir), origin=origin, batch_delay_ms=1.0,
                                  **config))
    srv = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
        app.extensions["ktl"].close()


def copy_log(src: Path, dest: Path) -> Path:
    """A copy of a stopped log's data folder (same key, same history up to now)."""
    shutil.copytree(src, dest)
    return dest


@dataclass
class Ktl:
    """Runs the real `ktl` command with a private $KTL_HOME."""

    home: Path

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        if args and args[0] == "publish" and "--results" not in args \
                and "--allow-weak" not in args:
            # A benchmark measured during the tests shares the machine with the other test
            # worker, so its own record may say its pinned CPU was busy: a weak claim, which
            # publish refuses without --allow-weak. That rule is tested on prepared results
            # (tests/test_verdicts_evidence.py); these end-to-end tests publish what they measured.
            args = (*args, "--allow-weak")
        runner = CliRunner()
        full_env = {"KTL_HOME": str(self.home), "KTL_LOG": "", "KTL_LOG_KEY": "",
                    "COLUMNS": "200"}
        full_env.update(env or {})
        return runner.invoke(main, list(args), env=full_env, catch_exceptions=False)

    def json(self, *args: str, code: int = 0) -> Any:
        res = self(*args, "--json")
        assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
        return json.loads(res.stdout)


def kernel_folder(tmp: Path, name: str = "acme/matmul-blocked", version: str = "1.0.0") -> Path:
    """A copy of the example matmul kernel under a given name/version."""
    dest = tmp / name.replace("/", "_") / version
    shutil.copytree(REPO / "examples" / "matmul-blocked", dest)
    toml = (dest / "kernel.toml").read_text()
    toml = toml.replace('name = "ktl-examples/matmul-blocked"', f'name = "{name}"')
    toml = toml.replace('version = "1.0.0"', f'version = "{version}"')
    (dest / "kernel.toml").write_text(toml)
    return dest


def small_results(tmp: Path, op: str | None = None) -> Path:
    """A prepared `--results` file (valid predicates, tiny) with inline raw samples;
    `op` names another op than the example's (the benchmark must name the folder's)."""
    bench = examples.benchmark_runs((2.1, 2.1, 2.1))
    bench["results"][0]["speedup_ci95"] = [1.95, 2.3]
    if op is not None:
        bench["workload"]["op"] = op
    # the raw samples the figures are recomputed from (issue 42): three runs of 50 batches
    # whose medians are the runs' 1000 ns against 2100 ns
    run = {"op": bench["workload"]["op"], "shapes": [
        {"shape": bench["results"][0]["shape"], "kernel_ns": [1000.0] * 50,
         "baseline_ns": [2100.0] * 50}]}
    samples = json.dumps({"runs": [run] * 3}, sort_keys=True, separators=(",", ":")).encode()
    bench["samples"] = {"sha256": hashlib.sha256(samples).hexdigest(), "size": len(samples),
                        "media_type": "application/json"}
    path = tmp / "results.json"
    path.write_text(json.dumps({"verification": examples.verification(), "benchmark": bench,
                                "samples": samples.decode()}))
    return path
