"""The mutation tester behind `make mutation`: its operators, its lists and its counting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mutation import run
from mutation.mutants import enumerate_mutants, mutated_tree

SOURCE = '''"""Module docstring."""
from typing import TYPE_CHECKING
__all__ = ["f"]
LIMIT = 16

if TYPE_CHECKING:
    X = 1


def f(xs: list[int], flag: bool = True) -> int | None:
    """Docstring."""
    total = 0
    for x in xs:
        if not x < LIMIT and flag:
            raise ValueError(f"too big: {x} over 16")
        total += x * 2
        print(x)
        if x == 3:
            break
    return total if total else None
'''


def _keys(source: str) -> set[str]:
    return {m.key for m in enumerate_mutants(source)}


def test_operators_known_answer() -> None:
    assert _keys(SOURCE) == {
        "LIMIT | 16 -> 17",
        "f | True -> False",
        "f | 0 -> 1",
        "f | if not x < LIMIT and flag -> if not (not x < LIMIT and flag)",
        "f | not x < LIMIT and flag -> not x < LIMIT or flag",
        "f | not x < LIMIT -> x < LIMIT",
        "f | x < LIMIT -> x >= LIMIT",
        "f | x < LIMIT -> x <= LIMIT",
        "f | raise ValueError(f'too big: {x} over 16') -> pass",
        "f | x * 2 -> x // 2",
        "f | total += x * 2 -> total -= x * 2",
        "f | 2 -> 3",
        "f | print(x) -> pass",
        "f | if x == 3 -> if not x == 3",
        "f | x == 3 -> x != 3",
        "f | 3 -> 4",
        "f | break -> continue",
        "f | return total if total else None -> return None",
        "f | if total -> if not total",
    }


def test_left_alone_docstrings_annotations_messages_all_and_type_checking() -> None:
    texts = " ".join(_keys(SOURCE))
    for untouched in ("Docstring", "docstring", "list[int]", "'f'", "X = 1", "over 17", "XX"):
        assert untouched not in texts


def test_each_mutant_changes_exactly_its_own_spot() -> None:
    original = ast.unparse(ast.parse(SOURCE))
    seen = set()
    for m in enumerate_mutants(SOURCE):
        tree = mutated_tree(SOURCE, m.index)
        text = ast.unparse(tree)
        assert text != original and text not in seen, m.key
        seen.add(text)
        compile(tree, "<mutant>", "exec")
        assert m.mutated.removeprefix("if ").removeprefix("while ") in " ".join(text.split())
    with pytest.raises(IndexError):
        mutated_tree(SOURCE, len(seen))


def test_keys_do_not_depend_on_line_numbers_and_repeat_with_a_count() -> None:
    moved = "\n\n\n" + SOURCE.replace('__all__ = ["f"]\n', "")
    assert _keys(moved) == _keys(SOURCE)
    twice = "def g(a):\n    a.f()\n    a.f()\n"
    assert _keys(twice) == {"g | a.f() -> pass", "g | a.f() -> pass #1"}


def test_strings_bytes_and_constants() -> None:
    src = 'P = b"\\x00"\nE = b""\nS = "\\n"\nN = None\n'
    assert _keys(src) == {
        "P | b'\\x00' -> b'\\x01'",
        "E | b'' -> b'X'",
        "S | '\\n' -> 'XX\\n'",
    }


def test_config_names_real_files_and_the_equivalents_list_loads() -> None:
    threshold, specs = run.load_config()
    assert threshold == 95.0
    paths = {s.path for s in specs}
    assert {"ledger/tlog/merkle.py", "ledger/tlog/note.py", "attest/dsse.py", "client/trust.py"} <= paths
    for e in run.load_equivalents(specs):
        assert e.module in paths and e.reason


def test_equivalents_list_rejects_unknown_modules_and_missing_reasons(tmp_path: Path) -> None:
    _, specs = run.load_config()
    bad = tmp_path / "eq.toml"
    bad.write_text('[[equivalent]]\nmodule = "ledger/nope.py"\nmutant = "a | b -> c"\nreason = "r" \n')
    with pytest.raises(run.MutationError, match="not configured"):
        run.load_equivalents(specs, bad)
    bad.write_text('[[equivalent]]\nmodule = "ledger/tlog/note.py"\nmutant = "a | b -> c"\n')
    with pytest.raises(run.MutationError, match="reason"):
        run.load_equivalents(specs, bad)


def test_score_leaves_out_equivalents_and_flags_wrong_entries() -> None:
    spec = run.ModuleSpec("ledger/tlog/note.py", ("tests/test_note.py",))
    result = run.ModuleResult(
        spec.path,
        run.fingerprint(spec),
        1.0,
        {"a": "killed", "b": "timeout", "c": "survived", "d": "survived", "e": "killed"},
        {"c": 7, "d": 9},
    )
    eq = [
        run.Equivalent(spec.path, "d", "cannot change behaviour"),
        run.Equivalent(spec.path, "e", "wrongly listed"),
        run.Equivalent(spec.path, "zz", "no such mutant"),
        run.Equivalent("ledger/tlog/merkle.py", "c", "other module's"),
    ]
    s = run.score(spec, result, eq)
    assert (s.mutants, s.equivalent, s.caught, s.timeout) == (5, 2, 2, 1)
    assert s.survivors == ((7, "c"),)
    assert s.percent == pytest.approx(200 / 3)
    assert any("does not exist: zz" in p for p in s.problems)
    assert any("tests catch: e" in p for p in s.problems)
    stale = run.ModuleResult(spec.path, "0" * 64, 1.0, {"a": "killed"})
    assert any("stale" in p for p in run.score(spec, stale, []).problems)


@pytest.mark.slow  # 7-11 s, among make test's longest: CI's slow step runs it
def test_a_mutant_run_kills_and_a_clean_run_passes() -> None:
    """One real fork: the unmutated module passes its tests; a deleted raise is caught."""
    spec = run.ModuleSpec("ledger/tlog/checkpoint.py", ("tests/test_checkpoint.py",))
    source = (run.ROOT / spec.path).read_text()
    (m,) = [
        m for m in enumerate_mutants(source)
        if m.kind == "raise" and "checkpoint extensions must be a tuple" in m.original
    ]
    assert run.baseline(spec) > 0
    code = compile(mutated_tree(source, m.index), spec.path, "exec")
    assert run._status(run._reap(run._wait_any({run._fork(spec, code)}))) == "killed"


def test_the_docs_document_the_command_and_a_row_per_module() -> None:
    readme = (run.ROOT / "docs" / "development.md").read_text()
    makefile = (run.ROOT / "Makefile").read_text()
    assert "make mutation" in readme and "\nmutation: " in makefile
    assert "-m mutation.run" in makefile and "mutation" not in makefile.split("\ntest:")[1].split("\n")[0]
    threshold, specs = run.load_config()
    assert f"below {threshold:.0f} %" in readme
    for spec in specs:
        assert f"| `{spec.path}` (" in readme, f"docs/development.md has no mutation row for {spec.path}"


def test_a_recheck_refuses_a_module_that_changed() -> None:
    spec = run.ModuleSpec("ledger/tlog/note.py", ("tests/test_note.py",))
    old = run.ModuleResult(spec.path, "0" * 64, 1.0, {"a": "killed"}, source_sha256="1" * 64)
    with pytest.raises(run.MutationError, match="changed since its kept results"):
        run.run_module(spec, 1, None, old)
