"""Write solutions for a KernelBench copy, in KernelBench's layout, for `ktl suite run`.

`--kind honest` (the default): each problem with its `Model` renamed `ModelNew`, the solution
KernelBench's own harness is tested with. The wrong kinds add a fault after the honest
forward, so a pass rate on them is the share of wrong kernels ktl would let through:

- `wrong-last`: the last element of the (first) output is off (by 1 + |value|);
- `wrong-odd`: the output is off by 1 % (an integer output by 1) only where the first
  input's last size is odd: right at the example's even sizes, wrong at varied shapes;
- `wrong-mixed`: `wrong-last` for problems 1-10, 21-30, ..., `wrong-odd` for the others.

The dataset is never copied into the repository: give its path and an output folder.

    python benchmarks/kernelbench_solutions.py /path/to/KernelBench/KernelBench solutions/ \\
        --level 1 --kind wrong-mixed --every 10
    ktl suite run /path/to/KernelBench/KernelBench solutions/ --out out/ --level 1 --no-bench

`--every K` keeps every K-th problem by number (a stated sample; `ktl suite run` then
reports the others as having no solution, so give it a problems folder of the same sample:
`--sample-problems DIR` writes one). `--tiny` writes both kinds for the committed suite
(tests/kernelbench_suite) into a temporary folder and checks each file compiles.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

KINDS = ("honest", "wrong-last", "wrong-odd", "wrong-mixed")

WRONG_LAST = '''

# --- wrong on purpose (benchmarks/kernelbench_solutions.py): the last element is off
import torch as _ktl_wrong_torch
_ktl_honest_forward = ModelNew.forward


def _ktl_wrong_forward(self, *args, **kwargs):
    out = _ktl_honest_forward(self, *args, **kwargs)
    first = out[0] if isinstance(out, (tuple, list)) and out else out
    if isinstance(first, _ktl_wrong_torch.Tensor) and first.numel():
        bad = first.clone()
        flat = bad.view(-1)
        flat[-1] = flat[-1] + 1 + flat[-1].abs()
        out = (bad, *out[1:]) if isinstance(out, (tuple, list)) else bad
    return out


ModelNew.forward = _ktl_wrong_forward
'''

WRONG_ODD = '''

# --- wrong on purpose (benchmarks/kernelbench_solutions.py): off where a size is odd
import torch as _ktl_wrong_torch
_ktl_honest_forward = ModelNew.forward


def _ktl_wrong_forward(self, *args, **kwargs):
    out = _ktl_honest_forward(self, *args, **kwargs)
    first = args[0] if args else None
    odd = isinstance(first, _ktl_wrong_torch.Tensor) and first.dim() and first.shape[-1] % 2
    if odd and isinstance(out, _ktl_wrong_torch.Tensor):
        out = out * 1.01 if out.is_floating_point() else out + 1
    return out


ModelNew.forward = _ktl_wrong_forward
'''


def honest(problem: str) -> str:
    """The problem with every `Model` (the class, its super() calls) renamed `ModelNew`."""
    return re.sub(r"\bModel\b", "ModelNew", problem)


def number(path: Path) -> int:
    head = path.name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**6


def solution(problem: Path, kind: str) -> str:
    text = honest(problem.read_text())
    if kind == "wrong-mixed":
        kind = "wrong-last" if (number(problem) - 1) // 10 % 2 == 0 else "wrong-odd"
    return text + {"honest": "", "wrong-last": WRONG_LAST, "wrong-odd": WRONG_ODD}[kind]


def write(dataset: Path, out: Path, levels: list[int], kind: str, every: int,
          sample_problems: Path | None) -> int:
    count = 0
    for level in levels:
        folder = dataset / f"level{level}"
        if not folder.is_dir():
            raise SystemExit(f"{folder}: no such level folder")
        for problem in sorted(folder.glob("*.py"), key=number):
            if (number(problem) - 1) % every:
                continue
            dest = out / f"level{level}" / problem.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(solution(problem, kind))
            if sample_problems is not None:
                copy = sample_problems / f"level{level}" / problem.name
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(problem, copy)
            count += 1
            print(f"{kind}: {dest}", flush=True)
    return count


def tiny() -> None:
    suite = Path(__file__).resolve().parent.parent / "tests" / "kernelbench_suite"
    with tempfile.TemporaryDirectory() as tmp:
        for kind in KINDS:
            n = write(suite, Path(tmp) / kind, [1, 2, 3], kind, 1, None)
            for path in (Path(tmp) / kind).rglob("*.py"):
                compile(path.read_text(), str(path), "exec")
                assert "class ModelNew" in path.read_text(), path
            print(f"{kind}: {n} solutions written and compiled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=None,
                        help="a KernelBench copy's KernelBench/ folder (level1/, level2/, ...)")
    parser.add_argument("out", type=Path, nargs="?", default=None)
    parser.add_argument("--level", type=int, action="append", default=None)
    parser.add_argument("--kind", choices=KINDS, default="honest")
    parser.add_argument("--every", type=int, default=1, help="every K-th problem by number")
    parser.add_argument("--sample-problems", type=Path, default=None,
                        help="also copy the sampled problems here (a problems folder for it)")
    parser.add_argument("--tiny", action="store_true", help="a smoke run on the committed suite")
    args = parser.parse_args()
    if args.tiny:
        tiny()
        return
    if args.dataset is None or args.out is None or args.every < 1:
        parser.error("give the dataset folder and an output folder (--every at least 1)")
    n = write(args.dataset, args.out, args.level or [1, 2, 3], args.kind, args.every,
              args.sample_problems)
    print(f"{n} {args.kind} solutions in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
