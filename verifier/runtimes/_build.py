"""What a build produces, shared by every runtime (kept apart so `runtime` and `_cuda`
need not import each other): the `Artifact`, the build limits, and the sanitizer
driver program with its case file format."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from verifier.errors import BuildError
from verifier.kernel import KernelSpec
from verifier.ops import OpSpec
from verifier.sandbox import ChildResult, Limits

__all__ = ["BUILD_LIMITS", "COMPILER_READ_ONLY", "VARIANTS", "Artifact", "build_failure",
           "driver_source", "reduce_diagnostics", "stage_sources",
           "write_driver_cases"]

VARIANTS = ("release", "asan", "tsan")
BUILD_LIMITS = Limits(cpu_s=120, wall_s=180.0, address_space=1 << 30, file_size=256 * 2**20,
                      open_files=256, processes=64, stdout_bytes=4 * 2**20,
                      stderr_bytes=4 * 2**20)
"""The compiler's sandbox: 1 GiB of address space (a macro-doubling source then fails
in seconds instead of taking the machine's memory), CPU and wall time, output file
size, processes (gcc's driver, cc1, as, ld), and capped diagnostics."""


MAX_DIAGNOSTICS = 12
_DIAGNOSTIC = re.compile(r"(?P<file>[^\s:()]{1,200})(?::(?P<line>\d{1,7})(?::\d{1,7})?|"
                         r"\((?P<nvline>\d{1,7})\)): "
                         r"(?P<severity>fatal error|error|warning|note): (?P<message>.*)")
"""gcc's `file:line[:col]: severity: message`, or nvcc's `file(line): severity: message`."""
_LINKER = re.compile(r"(?:.*: )?(?P<message>undefined reference to|multiple definition of|"
                     r"cannot find -l|relocation .* against|ld returned \d+ exit status)")
_QUOTED = re.compile(r"[\u2018\u201c'\"`][^\u2019\u201d'\"`]{0,200}[\u2019\u201d'\"`]")
COMPILER_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
                      "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/dev/zero", "/dev/urandom")
"""What the compiler may read besides the kernel's own folder: the toolchain and the system
headers and libraries; not /proc, /sys, /etc or /home (an `#include` of a host file fails)."""


def stage_sources(spec: KernelSpec, src_dir: Path, suffix: str) -> list[str]:
    """Write the kernel's sources under `src_dir` (their folders too); the listed sources
    ending in `suffix`, the ones to compile (BuildError where there are none)."""
    src_dir.mkdir(parents=True, exist_ok=True)
    for rel, data in spec.read_sources().items():
        dest = src_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    units = [rel for rel in spec.sources if rel.endswith(suffix)]
    if not units:
        raise BuildError(f"sources list no {suffix} file to compile")
    return units


def reduce_diagnostics(stderr: str) -> str:
    """Compiler output reduced to what a report needs: `file:line: severity: message` with
    every quoted part removed (a message can quote bytes of the file it read: an `#include`
    of a host file would put that file in a statement), no source lines, no include chains,
    at most `MAX_DIAGNOSTICS` lines; files outside the kernel's folder shown by name only."""
    kept: list[str] = []
    for raw in stderr.splitlines():
        line = raw.strip()
        hit = _DIAGNOSTIC.fullmatch(line)
        if hit is not None:
            where = hit.group("file")
            name = where if "/" not in where else f"<{where.rsplit('/', 1)[-1][:60]}>"
            message = _QUOTED.sub("'…'", hit.group("message"))[:160]
            line_no = hit.group("line") or hit.group("nvline")
            kept.append(f"{name}:{line_no}: {hit.group('severity')}: {message}")
        else:
            link = _LINKER.match(line)
            if link is not None:
                kept.append(f"linker: {link.group('message')} '…'")
        if len(kept) >= MAX_DIAGNOSTICS:
            kept.append("(more diagnostics not shown)")
            break
    return "; ".join(dict.fromkeys(kept))


def killed_why(result: ChildResult, limits: Limits) -> str:
    """Why a compiler run ended, without its stderr (which can quote what it read)."""
    return result.describe(limits).split(" (stderr:", 1)[0]


def build_failure(result: ChildResult, limits: Limits) -> str:
    """Why a compiler run failed: the limit it hit first, then its diagnostics' tail."""
    cap = limits.address_space or 0
    killed = (result.signal is not None or result.timed_out or result.output_excess is not None
              or result.denied_syscall is not None)
    why = killed_why(result, limits) if killed else ""
    if cap and result.maxrss_bytes > cap // 2:
        why = (f"the compiler reached its memory limit of {cap // 2**20} MiB "
               f"(peak RSS {result.maxrss_bytes // 2**20} MiB)" + (f"; {why}" if why else ""))
    tail = reduce_diagnostics(result.stderr)
    return "; ".join(part for part in (why, tail) if part) or killed_why(result, limits)


@dataclass(frozen=True)
class Artifact:
    """A built kernel: the file to load or run, and how it was built."""

    runtime: str
    variant: str
    path: Path
    argv: tuple[str, ...]
    log: str
    entry_symbol: str | None = None
    """The symbol the worker calls (None: the spec's entry); cuda exports a host wrapper."""
    gpu: bool = False
    """Its children need the GPU (device nodes, driver, no address-space limit)."""
    audit_path: Path | None = None
    """The library the static audit reads where it is not `path` (cuda: the kernel's own
    sources alone, linked against the shared CUDA runtime, whose imports are then theirs)."""


def driver_source(op: OpSpec, entry: str) -> str:
    """A C driver that feeds cases from a file to `entry` (a validated C identifier).

    It runs inside the kernel's process under the sanitizers and judges nothing: whether
    the kernel changed its inputs is decided in the parent from the worker's shared
    memory (the `inputs.unchanged` row), never from text this process prints."""
    ni, no, nd = len(op.inputs), len(op.outputs), len(op.dims)
    nb = ni + no
    params = ", ".join(["const float*"] * ni + ["float*"] * no + ["int64_t"] * nd)
    args = ", ".join([f"b[{i}]" for i in range(nb)] + [f"d[{i}]" for i in range(nd)])
    return f"""#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern void {entry}({params});
static int rd(FILE* f, void* p, size_t n) {{ return n == 0 || fread(p, 1, n, f) == n; }}
int main(int argc, char** argv) {{
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  int64_t ncases;
  if (!rd(f, &ncases, 8) || ncases < 0 || ncases > 10000) return 2;
  for (int64_t c = 0; c < ncases; c++) {{
    int64_t d[{nd}], n[{nb}];
    float* b[{nb}];
    if (!rd(f, d, sizeof d) || !rd(f, n, sizeof n)) return 2;
    for (int i = 0; i < {nb}; i++) {{
      if (n[i] < 0 || n[i] > (1LL << 28)) return 2;
      b[i] = malloc((size_t)n[i] * 4 + (n[i] == 0));
      if (!b[i]) return 3;
    }}
    for (int i = 0; i < {ni}; i++)
      if (!rd(f, b[i], (size_t)n[i] * 4)) return 2;
    for (int i = {ni}; i < {nb}; i++)
      for (int64_t j = 0; j < n[i]; j++) {{ uint32_t p = 0x7FC0DEADu; memcpy(&b[i][j], &p, 4); }}
    printf("KTL-CASE %lld\\n", (long long)c);
    fflush(stdout);
    {entry}({args});
    for (int i = 0; i < {nb}; i++) free(b[i]);
  }}
  printf("KTL-DONE\\n");
  return 0;
}}
"""


def write_driver_cases(
    path: Path, op: OpSpec, cases: Sequence[tuple[Mapping[str, int], Sequence[NDArray[np.float32]]]]
) -> None:
    """Write cases in the driver's format: count, then per case dims, sizes, inputs."""
    with open(path, "wb") as fh:
        fh.write(np.int64(len(cases)).tobytes())
        for dims, inputs in cases:
            fh.write(np.asarray([dims[d] for d in op.dims], dtype=np.int64).tobytes())
            sizes = [int(np.prod(s, dtype=np.int64)) for s in op.shapes(dims)]
            fh.write(np.asarray(sizes, dtype=np.int64).tobytes())
            for arr in inputs:
                fh.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())
