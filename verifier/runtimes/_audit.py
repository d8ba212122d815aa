"""A static audit of a built kernel library: what it imports, holds and executes.

No dynamic test can catch a kernel that behaves only outside the harness (honest only
where `/proc/self/status` says `Seccomp: 2`), so the built library itself is read:

- its undefined dynamic symbols (a small bounded ELF64 reader: `read_elf`), against an
  allowlist per runtime (math, memory, OpenMP, threads); `fopen`, `getenv`, `dlsym`,
  `syscall`, `prctl`, `clock_gettime` and the like are findings;
- the strings it holds (read-only and data sections) that name host paths or sandbox
  tells (`/proc/...`, `/sys/...`, `Seccomp`, `TracerPid`, ...);
- instructions that reach the kernel or a clock without an import (`syscall`, `sysenter`,
  `int $0x80`, `rdtsc`), from `objdump -d` run in the sandbox with capped output.

A finding fails the `audit.library` row unless the manifest declares it with a reason
(`[audit] allow = { getenv = "why" }`, see `verifier.kernel`). The same imports decide
whether the kernel starts threads (ThreadSanitizer applies): the object says, not a text
search of its sources.
"""

from __future__ import annotations

import re
import shutil
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verifier.errors import VerifierError
from verifier.sandbox import Limits, run_sandboxed

__all__ = ["ALLOWED_GROUPS", "CUDA_GROUPS", "MAX_LIBRARY_BYTES", "Audit", "AuditError", "LibraryFinding", "audit_library", "read_elf"]

MAX_LIBRARY_BYTES = 64 * 2**20
MAX_SECTIONS = 4096
MAX_SYMBOLS = 200_000
MAX_NAME = 512
MAX_FINDINGS = 64
DISASSEMBLY_LIMITS = Limits(cpu_s=60, wall_s=90.0, address_space=1 << 30, file_size=1 << 20,
                            open_files=64, processes=4, stdout_bytes=64 * 2**20,
                            stderr_bytes=64 * 1024)

LibraryFindingKind = Literal["symbol", "string", "instruction"]
Category = Literal["file", "environment", "dynamic_loading", "system_call", "process", "signal",
                   "time", "memory_map", "network", "host_path", "sandbox_tell",
                   "other"]


class AuditError(VerifierError):
    """The library cannot be audited (not an ELF64 file we can read, or over a bound)."""


@dataclass(frozen=True)
class LibraryFinding:
    """Something the library imports, holds or executes that the allowlist does not cover."""

    kind: LibraryFindingKind
    name: str
    category: Category
    declared: str | None = None
    """The manifest's reason, where it declares this finding."""

    def __str__(self) -> str:
        what = {"symbol": "imports", "string": "holds the string", "instruction": "executes"}
        return f"{what[self.kind]} {self.name} ({self.category.replace('_', ' ')})"


@dataclass(frozen=True)
class Audit:
    """The audit of one library: its imports, and the findings (declared or not)."""

    imports: tuple[str, ...]
    findings: tuple[LibraryFinding, ...]
    disassembled: bool

    @property
    def undeclared(self) -> tuple[LibraryFinding, ...]:
        return tuple(f for f in self.findings if f.declared is None)

    @property
    def threaded(self) -> bool:
        """The library starts threads: OpenMP, pthreads or C11 threads among its imports."""
        return any(s.startswith(("GOMP_", "omp_")) or s in THREAD_STARTS for s in self.imports)

    @property
    def openmp(self) -> bool:
        return any(s.startswith("GOMP_") for s in self.imports)


# -- the allowlist ------------------------------------------------------------------------------

THREAD_STARTS = frozenset({"pthread_create", "thrd_create"})
_BASE = frozenset({
    "__cxa_finalize", "__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
    "__stack_chk_fail", "__assert_fail", "abort", "__cpu_indicator_init", "__cpu_model",
})
_MEMORY = frozenset({
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign",
    "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "__memcpy_chk",
    "__memmove_chk", "__memset_chk", "qsort", "bsearch",
})
_OUTPUT = frozenset({
    "printf", "fprintf", "puts", "putchar", "fputs", "fputc", "fwrite", "fflush", "__printf_chk",
    "__fprintf_chk", "stdout", "stderr", "perror", "vprintf", "vfprintf", "snprintf", "sprintf",
    "__snprintf_chk", "__sprintf_chk", "vsnprintf",
})
"""Printing senses nothing (a FILE the kernel opened would need `fopen`, a finding)."""
_THREADS = frozenset({
    "pthread_create", "pthread_join", "pthread_self", "pthread_equal", "pthread_once",
    "pthread_attr_init", "pthread_attr_destroy", "pthread_attr_setstacksize",
    "pthread_mutex_init", "pthread_mutex_destroy", "pthread_mutex_lock", "pthread_mutex_trylock",
    "pthread_mutex_unlock", "pthread_cond_init", "pthread_cond_destroy", "pthread_cond_wait",
    "pthread_cond_signal", "pthread_cond_broadcast", "pthread_barrier_init",
    "pthread_barrier_destroy", "pthread_barrier_wait", "pthread_spin_init", "pthread_spin_lock",
    "pthread_spin_unlock", "pthread_spin_destroy", "pthread_rwlock_init", "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock", "pthread_rwlock_unlock", "pthread_rwlock_destroy",
    "pthread_key_create", "pthread_key_delete", "pthread_getspecific", "pthread_setspecific",
    "sched_yield", "thrd_create", "thrd_join", "mtx_init", "mtx_lock", "mtx_unlock",
    "mtx_destroy", "cnd_init", "cnd_wait", "cnd_signal", "cnd_broadcast", "cnd_destroy",
    "call_once", "sem_init", "sem_wait", "sem_post", "sem_destroy",
})
_MATH = re.compile(
    r"(?:__)?(?:sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh|asinh|acosh|atanh|exp|exp2|exp10|"
    r"expm1|log|log2|log10|log1p|logb|pow|sqrt|cbrt|hypot|fabs|floor|ceil|round|lround|llround|"
    r"trunc|rint|lrint|llrint|nearbyint|fmod|remainder|fma|fmin|fmax|fdim|copysign|nan|ldexp|"
    r"frexp|modf|scalbn|ilogb|erf|erfc|tgamma|lgamma|sincos)[fl]?(?:_finite)?")
_LIBGCC = re.compile(r"__[a-z]+(?:[sdthxb]f|[dts]i|[sdx]c)[0-9]")
"""Compiler helpers (`__divti3`, `__extendhfsf2`, `__truncsfbf2`, `__mulsc3`, ...)."""
_OPENMP = re.compile(r"(?:GOMP|omp)_[A-Za-z0-9_]+")
ALLOWED_GROUPS = "libc memory and output, math (libm), threads (pthreads, C11), libgcc helpers, OpenMP with -fopenmp"
_CUDA = re.compile(r"__cuda[A-Z][A-Za-z]*|cuda(?!Ipc)[A-Z][A-Za-z0-9_]*")
"""The CUDA runtime's API and the registration/launch calls nvcc generates (interprocess
memory handles excepted: `cudaIpc*` shares device memory with other processes)."""
_CXX = frozenset({
    "__cxa_atexit", "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort",
    "__gxx_personality_v0", "_Unwind_Resume", "_Znwm", "_Znam", "_ZdlPv", "_ZdlPvm", "_ZdaPv",
    "__cxa_begin_catch", "__cxa_end_catch", "__cxa_rethrow", "__cxa_throw",
    "__cxa_allocate_exception", "__cxa_free_exception", "_ZSt9terminatev",
})
"""What nvcc's generated host code needs from the C++ runtime (module registration at load,
its unregistration at exit, exception unwinding)."""
CUDA_GROUPS = ALLOWED_GROUPS + ", the CUDA runtime API (no cudaIpc*), C++ runtime support"

_CATEGORIES: Mapping[Category, frozenset[str]] = {
    "file": frozenset({"fopen", "fopen64", "fclose", "open", "open64", "openat", "openat64", "__open_2",
                       "__open64_2", "creat", "read", "pread", "pread64", "fread", "fgets", "fscanf",
                       "getline", "stat", "stat64", "lstat", "fstat", "fstatat", "__xstat",
                       "__fxstat", "__lxstat", "statx", "access", "faccessat", "readlink",
                       "readlinkat", "opendir", "readdir", "readdir64", "fdopen", "freopen",
                       "realpath", "getcwd", "chdir", "fchdir", "mkdir", "unlink", "rename",
                       "write", "pwrite", "close", "dup", "dup2", "ioctl", "fcntl", "mkstemp",
                       "tmpfile", "getdents64", "inotify_init"}),
    "environment": frozenset({"getenv", "secure_getenv", "environ", "__environ", "setenv",
                              "putenv", "unsetenv", "uname", "gethostname", "sysconf",
                              "get_nprocs", "get_nprocs_conf", "getauxval", "confstr"}),
    "dynamic_loading": frozenset({"dlopen", "dlsym", "dlvsym", "dladdr", "dlinfo",
                                  "dl_iterate_phdr", "dlerror", "dlclose"}),
    "system_call": frozenset({"syscall", "prctl", "ptrace", "seccomp", "personality",
                              "setrlimit", "getrlimit", "prlimit", "prlimit64", "unshare",
                              "setns", "capget", "capset", "mount", "chroot", "bpf",
                              "perf_event_open", "process_vm_readv", "process_vm_writev"}),
    "process": frozenset({"fork", "vfork", "clone", "clone3", "execve", "execv", "execvp",
                          "execl", "execlp", "system", "popen", "posix_spawn", "posix_spawnp",
                          "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid",
                          "kill", "tgkill", "raise", "waitpid", "wait", "exit", "_exit",
                          "atexit", "setsid", "sched_setaffinity", "sched_getaffinity",
                          "pthread_setaffinity_np", "pthread_getaffinity_np", "sched_setscheduler",
                          "setpriority", "nice", "pthread_kill", "pthread_sigmask"}),
    "signal": frozenset({"signal", "sigaction", "sigprocmask", "sigsetjmp", "siglongjmp",
                         "setjmp", "longjmp", "_setjmp", "__sigsetjmp", "sigaltstack",
                         "bsd_signal", "sysv_signal", "__sysv_signal"}),
    "time": frozenset({"clock_gettime", "clock_getres", "gettimeofday", "time", "clock",
                       "times", "getrusage", "nanosleep", "usleep", "sleep", "clock_nanosleep",
                       "timer_create", "alarm", "setitimer"}),
    "memory_map": frozenset({"mmap", "mmap64", "munmap", "mprotect", "madvise", "mremap",
                             "memfd_create", "shm_open", "mlock", "pkey_mprotect", "brk", "sbrk"}),
    "network": frozenset({"socket", "connect", "bind", "listen", "accept", "send", "sendto",
                          "recv", "recvfrom", "getaddrinfo", "gethostbyname"}),
}


def _allowed(symbol: str, openmp: bool, cuda: bool = False) -> bool:
    if cuda and (symbol in _CXX or _CUDA.fullmatch(symbol) is not None):
        return True
    return (symbol in _BASE or symbol in _MEMORY or symbol in _OUTPUT or symbol in _THREADS
            or _MATH.fullmatch(symbol) is not None or _LIBGCC.fullmatch(symbol) is not None
            or (openmp and _OPENMP.fullmatch(symbol) is not None))


def _category(symbol: str) -> Category:
    for category, names in _CATEGORIES.items():
        if symbol in names:
            return category
    return "other"


# -- a bounded ELF64 reader -----------------------------------------------------------------------

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_PROGBITS, SHT_DYNSYM = 1, 11
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4


@dataclass(frozen=True)
class _Section:
    type: int
    flags: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class ElfImage:
    """What the audit reads from an ELF64 file: undefined dynamic symbols, and the bytes of
    its allocated data sections (read-only data, data)."""

    undefined: tuple[str, ...]
    data: tuple[bytes, ...]


def _section(data: bytes, off: int) -> _Section:
    (_, stype, flags, _, offset, size, link, _, _, entsize) = _SHDR.unpack_from(data, off)
    if offset > len(data) or size > len(data) - offset:
        raise AuditError("a section lies outside the file")
    return _Section(stype, flags, offset, size, link, entsize)


def _name_at(table: _Section, data: bytes, at: int) -> str:
    if at >= table.size:
        raise AuditError("a symbol name lies outside its string table")
    start = table.offset + at
    end = data.find(b"\0", start, min(start + MAX_NAME, table.offset + table.size))
    if end < 0:
        raise AuditError("a symbol name is unterminated or over the length bound")
    return data[start:end].decode("ascii", "replace")


def read_elf(data: bytes) -> ElfImage:
    """Parse a little-endian ELF64 shared object; every offset and count is checked."""
    if len(data) > MAX_LIBRARY_BYTES:
        raise AuditError(f"the library is {len(data)} bytes; the audit reads at most "
                         f"{MAX_LIBRARY_BYTES}")
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise AuditError("not a little-endian ELF64 file")
    fields = _EHDR.unpack_from(data, 0)
    shoff, shentsize, shnum = fields[6], fields[11], fields[12]
    if shentsize != _SHDR.size or not 0 < shnum <= MAX_SECTIONS:
        raise AuditError("unexpected ELF section table")
    if shoff > len(data) or shnum * shentsize > len(data) - shoff:
        raise AuditError("the section table lies outside the file")
    sections = [_section(data, shoff + i * shentsize) for i in range(shnum)]
    undefined: list[str] = []
    for sec in sections:
        if sec.type != SHT_DYNSYM:
            continue
        if sec.entsize != _SYM.size or sec.link >= len(sections):
            raise AuditError("unexpected dynamic symbol table")
        count = sec.size // _SYM.size
        if count > MAX_SYMBOLS:
            raise AuditError(f"{count} dynamic symbols; the audit reads at most {MAX_SYMBOLS}")
        names = sections[sec.link]
        for i in range(1, count):
            st_name, _, _, shndx, _, _ = _SYM.unpack_from(data, sec.offset + i * _SYM.size)
            if shndx == 0 and st_name:
                undefined.append(_name_at(names, data, st_name))
    held = tuple(data[s.offset:s.offset + s.size] for s in sections
                 if s.type == SHT_PROGBITS and s.flags & SHF_ALLOC and not s.flags & SHF_EXECINSTR)
    return ElfImage(tuple(sorted(set(undefined))), held)


# -- strings and instructions ---------------------------------------------------------------------

_PRINTABLE = re.compile(rb"[\x20-\x7e]{4,}")
_HOST_PATH = re.compile(rb"/(?:proc|sys|dev|etc|run|var|tmp|home|root|boot|usr/lib)(?:/|\b)")
_TELLS = re.compile(rb"Seccomp|TracerPid|NoNewPrivs|CapEff|CapPrm|LD_PRELOAD|landlock|seccomp|"
                    rb"/\.dockerenv|container=")
_INSTRUCTION = re.compile(r":\s+(syscall|sysenter|int\s+\$0x80|rdtscp?|svc\s+#?0x0|svc\s+#0)\b")


def _strings(sections: Iterable[bytes]) -> list[LibraryFinding]:
    found: list[LibraryFinding] = []
    for blob in sections:
        for run in _PRINTABLE.findall(blob):
            category: Category | None = ("sandbox_tell" if _TELLS.search(run) else
                                         "host_path" if _HOST_PATH.search(run) else None)
            if category is not None:
                text = run[:80].decode("ascii")
                found.append(LibraryFinding("string", repr(text), category))
            if len(found) >= MAX_FINDINGS:
                return found
    return found


def _instructions(library: Path) -> tuple[list[LibraryFinding], bool]:
    """Findings from the disassembly (objdump, sandboxed); False where it could not be read."""
    objdump = shutil.which("objdump", path="/usr/bin:/bin:/usr/local/bin")
    if objdump is None:
        return [], False
    result = run_sandboxed([objdump, "-d", "--no-show-raw-insn", str(library)], library.parent,
                           DISASSEMBLY_LIMITS, readable=[library.parent])
    if not result.ok or result.output_excess is not None:
        return [], False
    seen: dict[str, LibraryFinding] = {}
    for _, line in result.lines:
        hit = _INSTRUCTION.search(line)
        if hit:
            mnemonic = re.sub(r"\s+", " ", hit.group(1))
            category: Category = "time" if mnemonic.startswith("rdtsc") else "system_call"
            seen.setdefault(mnemonic, LibraryFinding("instruction", mnemonic, category))
    return list(seen.values()), True


def audit_library(library: Path, openmp: bool, declared: Mapping[str, str],
                  cuda: bool = False) -> Audit:
    """Audit the built `library`; `openmp`: the manifest asks for -fopenmp (GOMP_/omp_ imports
    allowed); `declared`: the manifest's finding -> reason; `cuda`: the kernel's own code of a
    cuda build, linked against the shared CUDA runtime (its API allowed, `CUDA_GROUPS`).
    Raises AuditError."""
    try:
        data = library.read_bytes()
    except OSError as exc:
        raise AuditError(f"cannot read the built library: {exc}") from exc
    image = read_elf(data)
    findings = [LibraryFinding("symbol", s, _category(s)) for s in image.undefined
                if not _allowed(s, openmp, cuda)]
    findings += _strings(image.data)
    code, disassembled = _instructions(library)
    findings += code
    marked = [LibraryFinding(f.kind, f.name, f.category, declared.get(f.name.strip("'")))
              for f in findings[:MAX_FINDINGS]]
    return Audit(image.undefined, tuple(marked), disassembled)
