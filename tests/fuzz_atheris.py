"""Long fuzzing runs of `tests/fuzz_targets.py` under atheris (libFuzzer, coverage-guided).

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python tests/fuzz_atheris.py TARGET [-runs=N] [-max_total_time=S]

TARGET is one of `fuzz_targets.TARGETS` or ``all`` (each target in turn, in its own
process). The checked-in seeds are copied to a scratch folder first, so the corpus that
libFuzzer grows never lands in the repository. A crash (any exception but our typed
errors, or a failed round trip) stops the run with the input saved as ``crash-*``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _fuzz(name: str, args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports():
        import fuzz_targets
    if name not in fuzz_targets.TARGETS:
        raise SystemExit(f"unknown target {name!r}; one of {sorted(fuzz_targets.TARGETS)} or all")
    scratch = Path(tempfile.mkdtemp(prefix=f"ktl-fuzz-{name}-"))
    shutil.copytree(fuzz_targets.CORPUS / name, scratch / "corpus")

    def one(data: bytes) -> None:
        fuzz_targets.run_one(name, data)

    atheris.Setup([sys.argv[0], *args, str(scratch / "corpus")], one)
    atheris.Fuzz()


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    name, args = sys.argv[1], sys.argv[2:]
    if name != "all":
        _fuzz(name, args)
        return
    sys.path.insert(0, str(HERE))
    from fuzz_targets import TARGETS

    failed = [t for t in sorted(TARGETS)
              if subprocess.run([sys.executable, __file__, t, *args], check=False).returncode]
    if failed:
        raise SystemExit(f"crashes in: {', '.join(failed)}")


if __name__ == "__main__":
    main()
