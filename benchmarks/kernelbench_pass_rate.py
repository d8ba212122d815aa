"""Pass rate of `ktl import kernelbench` + `ktl check --budget quick` on a KernelBench copy.

Each problem gets the honest solution KernelBench's own harness is tested with: its `Model`
renamed `ModelNew`. Every problem runs as `ktl` subprocesses (a crash is a row, never the end
of the run), one at a time. Prints one line per problem as it goes, then a Markdown table and
a summary: passed / refused at import / failed / errors, and the median seconds of import +
check. The dataset is never copied into the repository: give its path.

    python benchmarks/kernelbench_pass_rate.py /path/to/KernelBench/KernelBench \\
        --level 1 --every 5 --out results.json

`--every K` takes every K-th problem by number (a stated sample), `--only N,M` exact numbers.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KTL = [sys.executable, "-c", "from client.cli import main; main()"]


def honest(problem: str) -> str:
    """The problem with its Model renamed ModelNew (KernelBench's honest solution)."""
    text = re.sub(r"\bclass Model\(", "class ModelNew(", problem)
    return re.sub(r"super\(Model, self\)", "super(ModelNew, self)", text)


def number(path: Path) -> int:
    head = path.name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**6


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _watched(argv: list[str], timeout_s: float) -> tuple[str, float]:
    """Run `argv`; its stdout and the peak resident memory of that process alone (ktl's
    own: the sandboxed reference and candidate are other processes), in MiB."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        peak, start = 0, time.monotonic()
        while proc.poll() is None:
            peak = max(peak, _rss_kib(proc.pid))
            if time.monotonic() - start > timeout_s:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(argv, timeout_s)
            time.sleep(0.2)
        out.seek(0)
        return out.read().decode(), round(peak / 1024, 1)


def one(problem: Path, work: Path, timeout_s: float) -> dict[str, Any]:
    folder = work / problem.stem
    folder.mkdir()
    solution = folder / "solution.py"
    solution.write_text(honest(problem.read_text()))
    start = time.monotonic()
    row: dict[str, Any] = {"problem": problem.name}
    try:
        done = subprocess.run([*KTL, "import", "kernelbench", str(problem), str(solution),
                               "--out", str(folder / "k"), "--json"],
                              capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            row.update(status="refused", reason=done.stderr.strip()[-400:])
            return row
        sizes = json.loads(done.stdout).get("sizes", {}).get("describe", "")
        row["sizes"] = sizes
        stdout, row["ktl_peak_rss_mib"] = _watched([*KTL, "check", str(folder / "k"), "--budget",
                                                    "quick", "--json"], timeout_s)
        report = json.loads(stdout)
        bad = [c for c in report.get("checks", []) if c.get("outcome") not in ("pass", "skip")]
        row["status"] = ("pass" if not bad else
                         "error" if any(c.get("outcome") == "error" for c in bad) else "fail")
        if bad:
            row["reason"] = "; ".join(f"{c['name']}: {c.get('detail', '')[:200]}" for c in bad[:3])
    except subprocess.TimeoutExpired:
        row.update(status="error", reason=f"past {timeout_s:.0f} s")
    except (ValueError, KeyError) as exc:
        row.update(status="error", reason=f"no JSON report: {exc}")
    finally:
        row["seconds"] = round(time.monotonic() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=None,
                        help="KernelBench's KernelBench/ folder (level1..)")
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--every", type=int, default=1, help="every K-th problem by number")
    parser.add_argument("--only", default="", help="problem numbers, comma-separated")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run: one problem of the committed suite of our own "
                             "(tests/kernelbench_suite), level 1, its 0-dim loss")
    args = parser.parse_args()
    if args.tiny:
        args.dataset = Path(__file__).resolve().parent.parent / "tests" / "kernelbench_suite"
        args.level, args.only, args.every = 1, "4", 1
    if args.dataset is None:
        parser.error("give the dataset folder (or --tiny)")
    problems = sorted((args.dataset / f"level{args.level}").glob("*.py"), key=number)
    if args.only:
        wanted = {int(n) for n in args.only.split(",")}
        problems = [p for p in problems if number(p) in wanted]
    problems = problems[::max(1, args.every)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ktl-kb-") as tmp:
        for k, problem in enumerate(problems, 1):
            row = one(problem, Path(tmp), args.timeout)
            rows.append(row)
            print(f"[{k}/{len(problems)}] {row['problem']}: {row['status']} "
                  f"({row['seconds']} s) {row.get('reason', row.get('sizes', ''))[:160]}",
                  flush=True)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "refused", "fail", "error")}
    median = statistics.median(r["seconds"] for r in rows) if rows else 0.0
    peaks = [r["ktl_peak_rss_mib"] for r in rows if r.get("ktl_peak_rss_mib")]
    print("\n| problem | result | s | ktl MiB | sizes / reason |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['problem']} | {r['status']} | {r['seconds']} | {r.get('ktl_peak_rss_mib', '')} | "
              f"{(r.get('reason') or r.get('sizes', '')).replace('|', '/')[:160]} |")
    print(f"\nlevel {args.level}: {counts['pass']} of {len(rows)} pass "
          f"({100 * counts['pass'] / max(1, len(rows)):.0f} %); refused {counts['refused']}, "
          f"fail {counts['fail']}, error {counts['error']}; median import + quick check "
          f"{median:.0f} s; ktl's own peak resident memory during a check "
          f"{max(peaks, default=0):.0f} MiB (median {statistics.median(peaks) if peaks else 0:.0f})")
    if args.out:
        args.out.write_text(json.dumps({"level": args.level, "rows": rows, "counts": counts,
                                        "median_s": median}, indent=1))


if __name__ == "__main__":
    main()
