"""Bundles that travel together are objects, and each of their defaults is declared once.

Both are read from the source (an AST scan), so a new function with a long parameter list
or a second copy of a bench default fails here, wherever it is added.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verifier import BenchSettings, VerifierError
from verifier.reproduce import ReproduceSettings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attest", "ledger", "client", "verifier")
MANY = 7
"""A function taking this many parameters (self/cls not counted) has a bundle to pass whole."""
MAX_WITH_MANY = 31
"""What is left: mostly click commands (one parameter per option) and constructors of
workers; lower it when one goes, never raise it."""
SETTINGS_HOME = ("verifier/benchmark/_settings.py", "BenchSettings")
DEVICE_HOME = ("verifier/benchmark/_device_bench.py", "DeviceBenchSettings")
"""A device bench's own budget and interval (longer runs, a tighter interval): declared once,
in its own settings, never in a function's signature."""


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    count = len(named) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (1 if named and named[0].arg in ("self", "cls") else 0)


def _sources(packages: tuple[str, ...]) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _literal_defaults(tree: ast.Module, names: set[str]) -> Iterator[tuple[str, int, str]]:
    """(name, line, owner) of each parameter or class field in `names` given a literal
    default; the owner is the function or class declaring it."""
    for fn in _functions(tree):
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True),
                 *((k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                   if d is not None)]
        for arg, default in pairs:
            if arg.arg in names and isinstance(default, ast.Constant) and default.value is not None:
                yield arg.arg, default.lineno, fn.name
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for st in cls.body:
                if (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                        and st.target.id in names and isinstance(st.value, ast.Constant)
                        and st.value.value is not None):
                    yield st.target.id, st.lineno, cls.name


def test_functions_with_many_parameters_do_not_grow() -> None:
    many = [f"{where}:{fn.lineno} {fn.name}" for where, tree in _sources(PACKAGES)
            for fn in _functions(tree) if _parameter_count(fn) >= MANY]
    assert len(many) <= MAX_WITH_MANY, "\n".join(many)


def test_the_count_sees_a_long_parameter_list() -> None:
    tree = ast.parse("def f(a, b, c, /, d, *e, g=1, h, **i): pass\n"
                     "class C:\n    def m(self, a, b, c, d, e, f): pass\n")
    assert [_parameter_count(fn) for fn in _functions(tree)] == [8, 6]


def test_each_bench_default_is_declared_once() -> None:
    # threads also names other facts (a check's worker calls, a server's pool): its bench
    # default is checked through `ktl bench` below
    names = {f.name for f in dataclasses.fields(BenchSettings)} - {"shapes", "seed", "threads"}
    names |= {"time_budget"}
    seen = [((where, owner), name, line) for where, tree in _sources(("verifier", "client"))
            for name, line, owner in _literal_defaults(tree, names)]
    assert sorted(name for home, name, _ in seen if home == SETTINGS_HOME) == sorted(
        names - {"time_budget"})
    assert [s for s in seen if s[0] not in (SETTINGS_HOME, DEVICE_HOME)] == []


def test_the_scan_sees_a_second_default() -> None:
    tree = ast.parse("def bench(d, time_budget_s=20.0, *, warmup=5, target=None): pass\n"
                     "class S:\n    min_reps: int = 20\n")
    assert sorted(_literal_defaults(tree, {"time_budget_s", "warmup", "target", "min_reps"})) == [
        ("min_reps", 3, "S"), ("time_budget_s", 1, "bench"), ("warmup", 1, "bench")]


def test_callers_take_the_settings_defaults() -> None:
    from click import Context

    from client.cli.kernel import bench_cmd

    assert ReproduceSettings().time_budget_s == BenchSettings().time_budget_s
    ctx = Context(bench_cmd)
    options = {p.name: p for p in bench_cmd.params}
    assert options["time_budget"].get_default(ctx) == BenchSettings().time_budget_s
    assert options["threads"].get_default(ctx) == BenchSettings().threads


@pytest.mark.parametrize("bad", [{"time_budget_s": 0}, {"time_budget_s": 3601}, {"target": 1.0},
                                 {"min_reps": 1}, {"min_reps": 50, "max_reps": 40},
                                 {"max_reps": 10**6 + 1}, {"warmup": -1}, {"threads": 0},
                                 {"threads": 1025}])
def test_settings_out_of_range_are_refused_when_built(bad: dict[str, Any]) -> None:
    with pytest.raises(VerifierError):
        BenchSettings(**bad)


def _progress_names(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(name, line) of each parameter typed as a progress callback (`Progress`, or
    `Callable[[str], None]` where verifier.progress cannot be imported)."""
    for fn in _functions(tree):
        a = fn.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            kind = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if "Progress" in kind or "Callable[[str], None]" in kind:
                yield arg.arg, fn.lineno


def test_one_name_for_the_progress_callback() -> None:
    others = [f"{where}:{line} {name}" for where, tree in _sources(PACKAGES)
              for name, line in _progress_names(tree) if name != "progress"]
    assert others == []


def test_the_progress_scan_sees_another_name() -> None:
    tree = ast.parse("def f(say: Progress, progress: Progress | None = None): pass\n"
                     "def g(note: Callable[[str], None]): pass\n")
    assert sorted(_progress_names(tree)) == [("note", 2), ("progress", 1), ("say", 1)]


def test_bench_until_agree_reaches_the_run_set(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """`ktl bench --until-agree N` asks the run set for more runs while they disagree, up to
    N (0 without it); its help names the width that counts as disagreeing and publish's cap,
    both as the code has them; out of range it is a usage error."""
    from click.testing import CliRunner

    import client.cli.kernel as kernel_cli
    from attest.verdicts import HALFWIDTH_WEAK
    from verifier import PUBLISH_MAX_RUNS

    asked: list[tuple[int, int]] = []

    def fake_runs(kernel_dir: Path, runs: int, settings: BenchSettings, **_: Any) -> Any:
        asked.append((runs, settings.until_agree))
        raise VerifierError("stop here")

    monkeypatch.setattr(kernel_cli, "bench_runs", fake_runs)
    runner = CliRunner()
    for extra in ([], ["--until-agree", "9"], ["--runs", "3", "--until-agree", "12"]):
        runner.invoke(kernel_cli.bench_cmd, [str(tmp_path), *extra])
    assert asked == [(5, 0), (5, 9), (3, 12)]
    help_text = " ".join(runner.invoke(kernel_cli.bench_cmd, ["--help"]).output.split())
    assert f"+-{100 * HALFWIDTH_WEAK:.0f} %" in help_text
    assert f"up to {PUBLISH_MAX_RUNS})" in help_text
    assert runner.invoke(kernel_cli.bench_cmd, [str(tmp_path), "--until-agree", "0"]
                         ).exit_code == 2
