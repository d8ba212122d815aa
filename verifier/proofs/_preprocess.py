"""The kernel's sources as gcc's preprocessor sees them in the release build, for ESBMC.

A two-faced kernel can test a macro only a proof tool defines (`__clang__` of ESBMC's front
end, `__ESBMC`, `__GNUC__ < 5`, or one pasted from tokens) and hide its bug from the proof
alone. So ESBMC never preprocesses kernel code: gcc does, with the kernel's own flags (the
same `-O3`, `-march`, `-fopenmp` macros as the release build) and, instead of the system's
headers (whose gcc-only types ESBMC's front end cannot parse), the small headers here, which
declare the standard C a kernel uses. A kernel including any other header (intrinsics,
say) gets no proof: its row is inconclusive. Line markers keep every location in the
kernel's own files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from verifier.environment import find_gcc
from verifier.errors import SandboxError
from verifier.proofs._harness import LIBM_STUBS
from verifier.sandbox import Limits, run_sandboxed

__all__ = ["HEADERS", "origin", "preprocess"]

_MATH_MORE = ("fabsf", "fabs", "fmaxf", "fminf", "fmax", "fmin", "floorf", "floor", "ceilf",
              "ceil", "roundf", "round", "truncf", "trunc", "copysignf", "copysign",
              "ldexpf", "ldexp", "rsqrtf", "cbrtf", "log10f", "log2", "atanf", "atan2f")
_TWO = {"powf", "pow", "fmodf", "fmod", "fmaxf", "fminf", "fmax", "fmin", "copysignf",
        "copysign", "atan2f"}


def _math_h() -> str:
    lines = ["#define INFINITY (__builtin_inff())", "#define NAN (__builtin_nanf(\"\"))",
             "#define HUGE_VALF (__builtin_inff())", "#define HUGE_VAL (__builtin_inf())",
             "#define isnan(x) __builtin_isnan(x)", "#define isinf(x) __builtin_isinf(x)",
             "#define isfinite(x) __builtin_isfinite(x)", "#define signbit(x) __builtin_signbit(x)",
             "#define M_PI 3.14159265358979323846", "#define M_SQRT2 1.41421356237309504880"]
    for name in (*LIBM_STUBS, *_MATH_MORE):
        typ = "float" if name.endswith("f") and name != "erf" else "double"
        if name in ("ldexpf", "ldexp"):
            lines.append(f"{typ} {name}({typ}, int);")
        else:
            lines.append(f"{typ} {name}({typ}{', ' + typ if name in _TWO else ''});")
    return "\n".join(lines) + "\n"


HEADERS: Mapping[str, str] = {
    "stddef.h": "typedef __SIZE_TYPE__ size_t;\ntypedef __PTRDIFF_TYPE__ ptrdiff_t;\n"
                "#define NULL ((void *)0)\n#define offsetof(t, m) __builtin_offsetof(t, m)\n",
    "stdint.h": "".join(f"typedef __{t.upper()}_TYPE__ {t}_t;\n" for t in (
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "intptr",
        "uintptr")) + "#define INT32_MAX 2147483647\n#define INT64_MAX 9223372036854775807L\n"
                      "#define UINT32_MAX 4294967295U\n#define SIZE_MAX (~(__SIZE_TYPE__)0)\n",
    "stdbool.h": "#define bool _Bool\n#define true 1\n#define false 0\n",
    "stdlib.h": "#include <stddef.h>\nvoid *malloc(size_t);\nvoid *calloc(size_t, size_t);\n"
                "void *realloc(void *, size_t);\nvoid free(void *);\nvoid abort(void);\n"
                "int abs(int);\n",
    "string.h": "#include <stddef.h>\nvoid *memcpy(void *, const void *, size_t);\n"
                "void *memset(void *, int, size_t);\nvoid *memmove(void *, const void *, size_t);\n",
    "math.h": _math_h(),
    "float.h": "#define FLT_MAX __FLT_MAX__\n#define FLT_MIN __FLT_MIN__\n"
               "#define FLT_EPSILON __FLT_EPSILON__\n#define DBL_MAX __DBL_MAX__\n",
    "limits.h": "#define INT_MAX __INT_MAX__\n#define INT_MIN (-__INT_MAX__ - 1)\n"
                "#define LONG_MAX __LONG_MAX__\n#define CHAR_BIT 8\n",
    "omp.h": "int omp_get_thread_num(void);\nint omp_get_num_threads(void);\n"
             "int omp_get_max_threads(void);\n",
}
"""The headers a kernel may include under the proof, each declaring what it names."""
_MARKER = re.compile(r'^# (\d{1,9}) "([^"]{1,256})"')


def origin(text: str, line: int) -> tuple[str, int] | None:
    """The file and line that line `line` (1-based) of preprocessed `text` came from, by its
    line markers (ESBMC reports places in the .i file it read)."""
    where: tuple[str, int] | None = None
    for number, raw in enumerate(text.splitlines()[:line], start=1):
        hit = _MARKER.match(raw)
        if hit is not None:
            where = (hit.group(2), int(hit.group(1)) - 1)
        elif where is not None:
            where = (where[0], where[1] + 1)
        if number == line:
            return where
    return None
LIMITS = Limits(cpu_s=30, wall_s=120.0, address_space=1 << 30, file_size=64 * 2**20,
                open_files=64, processes=16, stdout_bytes=1 << 20, stderr_bytes=1 << 20)


def preprocess(where: Path, sources: Sequence[str], flags: Sequence[str],
               read_only: Sequence[str]) -> tuple[list[str], str | None]:
    """Each C file of `sources` (in `where`) preprocessed to `<name>.i` beside it: (the .i
    files, None), or ([], why not)."""
    include = where / "ktl-include"
    include.mkdir(exist_ok=True)
    for name, text in HEADERS.items():
        (include / name).write_text(text, encoding="utf-8")
    kept = [f for f in flags if f.startswith(("-O", "-m", "-f", "-D", "-U", "-std="))]
    out = []
    for rel in sources:
        target = f"{rel}.i"
        argv = [find_gcc(), "-E", *kept, "-nostdinc", "-isystem", "ktl-include", "-o", target,
                rel]
        try:
            result = run_sandboxed(argv, where, LIMITS, system=read_only)
        except SandboxError as exc:
            return [], f"the preprocessor could not start: {exc}"[:300]
        if not result.ok:
            missing = [line.split(": fatal error: ", 1)[1] for line in result.stderr.splitlines()
                       if ": fatal error: " in line][:1]
            why = missing[0][:160] if missing else result.describe(LIMITS)[:300]
            return [], (f"gcc -E failed ({why}); the proof models only the headers "
                        f"{', '.join(sorted(HEADERS))}")
        out.append(target)
    return out, None
