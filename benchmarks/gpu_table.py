"""The rows of docs/performance.md's GPU table from a `benchmarks/gpu_check.sh` run's $OUT,
and whether a step's summary line gave what the script expects of it.

    python3 benchmarks/gpu_table.py OUT
    python3 benchmarks/gpu_table.py --expect EXPECT 'LABEL: {...}'    (exit 0: it did)

Reads OUT/probe.json and each step's OUT/<label>.json (the summary line the step printed)
and prints one Markdown row per step, in the script's order: a bench's speed-up and
interval in each L2 mode with its repetitions, seconds and whether it is trusted; an
attack's faults; a reproduction's verdict. A step that left no JSON is a row saying so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STEPS = ("triton_rmsnorm", "triton_rmsnorm_cold", "triton_bias_gelu", "cuda_softmax",
         "attack_sidestream", "attack_eventpatch", "attack_ptrcache", "attack_stale",
         "attack_zeroed", "attack_reuse", "attack_graphreplay", "attack_otherprocess",
         "reproduce_triton_rmsnorm")
"""gpu_check.sh's steps that write a summary line, in its order (tests/test_gpu_check.py
keeps the two lists the same)."""


def _interval(line: dict[str, Any]) -> str:
    lo, hi = line["ci95"]
    return f"{line['speedup']:.3g}x [{lo:.3g}, {hi:.3g}]"


def _modes(line: dict[str, Any]) -> str:
    out = []
    for m in line.get("modes") or ():
        half = (m["ci95"][1] - m["ci95"][0]) / 2 / max(m["speedup"], 1e-12)
        out.append(f"{'cold' if m['cold'] else 'warm'} {_interval(m)} ±{100 * half:.1f} %, "
                   f"n={m['n']}")
    return "; ".join(out) or "no figure"


def row(label: str, line: dict[str, Any] | None) -> str:
    """One Markdown row of the table for a step's summary line (None: no JSON left)."""
    if line is None:
        return f"| `{label}` | not run (no {label}.json) |"
    seconds = f"{line.get('seconds', '?')} s"
    if label.startswith("attack_"):
        faults = ", ".join(f"`{f}`" for f in dict.fromkeys(line.get("faults") or ())) or "none"
        verdict = "refused" if line.get("refused") else "NOT refused"
        return f"| `{label}` | {verdict}: {faults}; trusted {line.get('trusted')}, {seconds} |"
    if label.startswith("reproduce_"):
        verdicts = ", ".join(line.get("verdicts") or ()) or "none"
        figure = _interval(line) if line.get("ci95") else "no figure"
        return (f"| `{label}` ({line.get('runs')} runs claimed, as many reproduced) | "
                f"{verdicts}: {figure}, {seconds} |")
    trusted = "trusted" if line.get("trusted") else "NOT trusted"
    faults = ", ".join(line.get("faults") or ())
    return (f"| `{label}` | {_modes(line)}; {trusted}{'; faults ' + faults if faults else ''}, "
            f"{seconds} |")


def table(out: Path) -> list[str]:
    rows = ["| step | figure |", "|---|---|"]
    probe = out / "probe.json"
    if probe.is_file():
        body = json.loads(probe.read_text())
        peaks, device = body.get("peaks") or {}, body.get("device") or {}
        rows.append(f"| `probe` | {device.get('model', '?')}: {peaks.get('flops', 0) / 1e12:.0f} "
                    f"TFLOP/s, {peaks.get('bytes_per_s', 0) / 1e12:.2f} TB/s, "
                    f"{device.get('sm_count', '?')} SMs, "
                    f"{device.get('l2_bytes', 0) / 2**20:.0f} MiB L2 |")
    for label in STEPS:
        path = out / f"{label}.json"
        rows.append(row(label, json.loads(path.read_text())["summary"] if path.is_file() else None))
    return rows


BENCH_SECONDS = 60.0
"""Most seconds a bench step may take, its processes' start included (issue 44)."""


def meets(expect: str, line: dict[str, Any] | None) -> bool:
    """Whether a step's summary line (None: it printed none) gave `expect`:
    `ok`: trusted (so within the +-5 % limit), within BENCH_SECONDS, conditions read while
    the timed batches ran, both L2 modes recorded; `cold`: that, with the cold mode's
    figures as the results; `refused:KIND|KIND..`: not trusted, with one of those typed
    faults; `confirmed`: every claim confirmed; `any`: whatever it printed."""
    if expect == "any":
        return True
    if line is None:
        return False
    if expect in ("ok", "cold"):
        modes = {bool(m.get("cold")) for m in line.get("modes") or ()}
        seconds = line.get("seconds")
        good = line.get("trusted") is True and (line.get("during_samples") or 0) > 0 \
            and modes == {False, True} and isinstance(seconds, int | float) \
            and seconds <= BENCH_SECONDS
        return good and (expect == "ok" or line.get("cold") is True)
    if expect.startswith("refused:"):
        kinds = set(expect.removeprefix("refused:").split("|"))
        return line.get("refused") is True and line.get("trusted") is False and \
            bool(kinds & set(line.get("faults") or ()))
    if expect == "confirmed":
        verdicts = line.get("verdicts") or []
        return bool(verdicts) and all(v == "confirmed" for v in verdicts)
    raise ValueError(f"unknown expectation {expect!r}")


def parse_line(text: str) -> dict[str, Any] | None:
    """The JSON of a 'label: {...}' summary line (None: not one)."""
    _, _, body = text.partition(": ")
    try:
        got = json.loads(body)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--expect":
        return 0 if meets(argv[2], parse_line(argv[3])) else 1
    if len(argv) != 2:
        print("\n".join(__doc__.strip().splitlines()[3:5]), file=sys.stderr)
        return 2
    print("\n".join(table(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
