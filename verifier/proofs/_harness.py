"""The C harnesses the proofs run, generated from the op catalogue (never from the kernel).

ESBMC's harness (`memory_harness`) gives every dimension a nondeterministic value in
[0, bound], allocates every buffer as a separate heap object of exactly its declared size
(inputs then outputs, in catalogue order) with nondeterministic contents, and calls the
entry once. libm is over-approximated: `expf` and friends return any float (sound for memory
safety, and hundreds of times faster than ESBMC's own models). Frama-C's harness
(`overflow_harness`) gives every dimension the whole range [0, 2^31-1] and buffers of
unknown size: only its integer alarms are read. The planted kernels (`planted_memory`,
`planted_overflow`) are the self-tests: the same op and ABI, with a bug the tools must find.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from verifier.ops import OpSpec

__all__ = ["LIBM_STUBS", "OVERFLOW_BOUNDS", "OVERFLOW_MAX", "PLANTED_ENTRY", "PROOF_BOUNDS", "RESERVED",
           "buffer_sizes", "defined_names", "memory_harness", "overflow_harness", "planted_memory",
           "planted_overflow", "reserved_names", "strip_pragmas"]

PROOF_BOUNDS: Mapping[str, Mapping[str, int]] = {
    "sum": {"R": 8, "C": 8},
    "softmax": {"R": 8, "C": 8},
    "rmsnorm": {"R": 8, "C": 8},
    "matmul": {"M": 4, "N": 4, "K": 4},
    "attention": {"B": 1, "H": 1, "S": 3, "D": 2},
    "attention_causal": {"B": 1, "H": 1, "S": 3, "D": 2},
}
"""The largest size of each dimension a `proof.memory` covers (every size from 0 to it),
chosen so the examples are proved within the CPU limit on a loaded 2-core machine."""
OVERFLOW_MAX = 2**31 - 1
OVERFLOW_BOUNDS: Mapping[str, Mapping[str, int]] = {
    "sum": {"R": OVERFLOW_MAX, "C": OVERFLOW_MAX},
    "softmax": {"R": OVERFLOW_MAX, "C": OVERFLOW_MAX},
    "rmsnorm": {"R": OVERFLOW_MAX, "C": OVERFLOW_MAX},
    "matmul": {"M": OVERFLOW_MAX, "N": OVERFLOW_MAX, "K": OVERFLOW_MAX},
    "attention": {"B": 2**8, "H": 2**8, "S": 2**22, "D": 2**22},
    "attention_causal": {"B": 2**8, "H": 2**8, "S": 2**22, "D": 2**22},
}
"""The largest size of each dimension in `proof.overflow` (every size from 1 to it): every
dimension up to 2^31-1 where each buffer still fits a 64-bit address space; for the 4-d
attention, 2^8 x 2^8 x 2^22 x 2^22 (2^60 elements: every flat index past 2^32, and no
overflow of a 64-bit product of a real buffer's dimensions). Empty shapes (a dimension 0) are
left to `proof.memory`, whose bounds include 0, exactly (EVA cannot relate a loop bound
`B*H*S` = 0 to a later division by S)."""
PLANTED_ENTRY = "ktl_planted_entry"
LIBM_STUBS = ("expf", "exp", "exp2f", "exp2", "expm1f", "logf", "log", "log2f", "log1pf",
              "sqrtf", "sqrt", "tanhf", "tanh", "erff", "erf", "powf", "pow", "sinf", "cosf",
              "sin", "cos", "fmodf", "fmod")
"""Over-approximated in the memory proof: each returns any float (of its type)."""
_TWO_ARGS = {"powf", "pow", "fmodf", "fmod"}
RESERVED = ("main", "malloc", "calloc", "realloc", "free", *LIBM_STUBS)
"""Names the harness defines or relies on: a kernel that defines one (or a macro of one) could
steer the proof, so its row is inconclusive."""
_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b.*?(?<!\\)$", re.M | re.S)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_NOT_TYPES = {"return", "else", "do", "case", "sizeof", "goto"}


def strip_pragmas(text: str) -> str:
    """The source with every `#pragma omp` line (and its continuations) blanked, line numbers
    kept: Frama-C 25 cannot parse `#pragma omp ... if(...)`; the proofs are of the sequential
    program either way."""
    def blank(hit: re.Match[str]) -> str:
        return "\n" * hit.group(0).count("\n")

    return _PRAGMA.sub(blank, text)


def reserved_names(text: str) -> list[str]:
    """Reserved names the source declares, defines or `#define`s (comments ignored): a name
    followed by `(` and preceded by a type word (`void *malloc(`), not by an operator."""
    code = _COMMENT.sub(" ", text)
    found = []
    for name in RESERVED:
        if re.search(rf"#\s*(define|undef)\s+{name}\b", code):
            found.append(name)
            continue
        for hit in re.finditer(rf"\b{name}\s*\(", code):
            before = re.search(r"([A-Za-z_]\w*)[\s*]*$", code[:hit.start()])
            if before is not None and before.group(1) not in _NOT_TYPES:
                found.append(name)
                break
    return found


def defined_names(text: str) -> list[str]:
    """Reserved names a preprocessed source defines (a body follows the parameters): what a
    macro built from pasted tokens hid from `reserved_names`."""
    code = _COMMENT.sub(" ", text)
    return [name for name in RESERVED
            if re.search(rf"\b{name}\s*\([^;{{}}]*\)\s*\{{", code)]


def buffer_sizes(op: OpSpec) -> list[str]:
    """Each buffer's element count as a C expression over the harness's dimension names."""
    return [" * ".join(f"ktl_{d}" for d in operand.shape) or "1"
            for operand in (*op.inputs, *op.outputs)]


def _prototype(op: OpSpec, entry: str) -> str:
    params = (["const float*"] * len(op.inputs) + ["float*"] * len(op.outputs)
              + ["int64_t"] * len(op.dims))
    return f"void {entry}({', '.join(params)});"


def _call(op: OpSpec, entry: str) -> str:
    nb = len(op.inputs) + len(op.outputs)
    return f"{entry}({', '.join([f'ktl_b{i}' for i in range(nb)] + [f'ktl_{d}' for d in op.dims])});"


def _libm_stubs() -> str:
    out = []
    for name in LIBM_STUBS:
        typ = "float" if name.endswith("f") and name not in ("erf",) else "double"
        args = f"{typ} a, {typ} b" if name in _TWO_ARGS else f"{typ} a"
        used = "(void)a; (void)b;" if name in _TWO_ARGS else "(void)a;"
        out.append(f"{typ} {name}({args}) {{ {used} return ktl_any_{typ}(); }}")
    return "\n".join(out)


def memory_harness(op: OpSpec, entry: str, bounds: Mapping[str, int]) -> str:
    """ESBMC's harness: dims in [0, bound], exact-size heap buffers, any contents."""
    dims = "\n".join(
        f"  int64_t ktl_{d} = ktl_any_int64();\n"
        f"  __ESBMC_assume(ktl_{d} >= 0 && ktl_{d} <= {int(bounds[d])});" for d in op.dims)
    buffers = "\n".join(
        f"  float *ktl_b{i} = malloc((size_t)({size}) * sizeof(float));\n"
        f"  __ESBMC_assume(ktl_b{i} != 0);" for i, size in enumerate(buffer_sizes(op)))
    frees = " ".join(f"free(ktl_b{i});" for i in range(len(buffer_sizes(op))))
    return f"""#include <stddef.h>
#include <stdint.h>
void *malloc(size_t);
void free(void *);
int64_t __VERIFIER_nondet_long(void);
float __VERIFIER_nondet_float(void);
double __VERIFIER_nondet_double(void);
static int64_t ktl_any_int64(void) {{ return __VERIFIER_nondet_long(); }}
static float ktl_any_float(void) {{ return __VERIFIER_nondet_float(); }}
static double ktl_any_double(void) {{ return __VERIFIER_nondet_double(); }}
{_libm_stubs()}
{_prototype(op, entry)}
int main(void) {{
{dims}
{buffers}
  {_call(op, entry)}
  {frees}
  return 0;
}}
"""


def overflow_harness(op: OpSpec, entry: str) -> str:
    """Frama-C EVA's harness: every dimension in [1, its OVERFLOW_BOUNDS]; every buffer a
    zero-initialised global of 2^60 elements (initialised, so no read ends EVA's path, and
    valid at every flat index a real buffer can have)."""
    bounds = OVERFLOW_BOUNDS[op.name]
    dims = "\n".join(f"  int64_t ktl_{d} = Frama_C_long_long_interval(1, {bounds[d]});"
                     for d in op.dims)
    buffers = "\n".join(f"static float ktl_b{i}[(size_t)1 << 60];"
                        for i in range(len(buffer_sizes(op))))
    return f"""#include "__fc_builtin.h"
#include <stddef.h>
#include <stdint.h>
{_prototype(op, entry)}
{buffers}
int main(void) {{
{dims}
  {_call(op, entry)}
  return 0;
}}
"""


def _params(op: OpSpec) -> str:
    ins = [f"const float *in{i}" for i in range(len(op.inputs))]
    outs = [f"float *out{i}" for i in range(len(op.outputs))]
    return ", ".join([*ins, *outs, *(f"int64_t {d}" for d in op.dims)])


def _unused(op: OpSpec) -> str:
    names = ([f"in{i}" for i in range(len(op.inputs))]
             + [f"out{i}" for i in range(len(op.outputs))] + list(op.dims))
    return " ".join(f"(void){n};" for n in names)


def planted_memory(op: OpSpec, bounds: Mapping[str, int]) -> str:
    """A kernel of `op` that reads one element past its first input, only at the largest
    shape the bounds allow: caught only if the tool explores the whole bounded space."""
    at_bound = " && ".join(f"{d} == {int(bounds[d])}" for d in op.dims)
    size = " * ".join(op.inputs[0].shape)
    return f"""#include <stdint.h>
void {PLANTED_ENTRY}({_params(op)}) {{
  {_unused(op)}
  float s = 0.0f;
  if ({at_bound}) s = in0[{size}]; /* planted: one past the end */
  if ({" * ".join(op.outputs[0].shape)} > 0) out0[0] = s;
}}
"""


def planted_overflow(op: OpSpec) -> str:
    """A kernel of `op` whose flat index is a 32-bit product of its two largest dimensions
    (by OVERFLOW_BOUNDS: their product passes 2^31)."""
    largest: Sequence[str] = sorted(op.dims, key=lambda d: -OVERFLOW_BOUNDS[op.name][d])
    a, b = largest[0], largest[1]
    return f"""#include <stdint.h>
void {PLANTED_ENTRY}({_params(op)}) {{
  {_unused(op)}
  int rows = (int){a}, cols = (int){b};
  if (rows > 0 && cols > 0) out0[0] = in0[(rows - 1) * cols]; /* planted: 32-bit product */
}}
"""
