"""The docs' examples are true: their kernel.toml, policy, commands and names match the code."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import click
import pytest

from attest import PolicyError
from attest.keys import generate_private_key, keyid
from attest.policy import TrustPolicy
from attest.predicates import PREDICATE_NAMESPACE
from client.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def _blocks(kind: str, text: str) -> list[str]:
    return [m.group(2) for m in BLOCK.finditer(text) if m.group(1) == kind]


def test_kernel_toml_example_is_the_shipped_example() -> None:
    (example,) = [b for b in _blocks("toml", _page("checks.md")) if b.lstrip().startswith("name =")]
    shipped = (ROOT / "examples" / "matmul-blocked" / "kernel.toml").read_text()
    assert tomllib.loads(example) == tomllib.loads(shipped)


def test_policy_example_loads_with_a_real_keyid() -> None:
    (example,) = [b for b in _blocks("toml", _page("auditing.md")) if "<64-hex keyid>" in b]
    kid = keyid(generate_private_key().public_key())
    policy = TrustPolicy.from_toml(example.replace("<64-hex keyid>", kid))
    assert policy is not None
    with pytest.raises(PolicyError, match="keys"):
        TrustPolicy.from_toml(example)  # the placeholder itself is not a keyid


def _ktl_lines() -> list[list[str]]:
    """Every `ktl` line of every page: `sh` blocks, and the `$ ktl` lines of `console` blocks."""
    lines = []
    for page in PAGES:
        text = page.read_text()
        for block in _blocks("sh", text):
            for line in block.splitlines():
                code = line.split("#", 1)[0].strip()
                if code.startswith("ktl "):
                    lines.append(shlex.split(code)[1:])
        for block in _blocks("console", text):
            lines += [shlex.split(line[2:])[1:] for line in block.splitlines()
                      if line.startswith("$ ktl ")]
    return lines


def test_every_ktl_command_and_option_in_the_docs_exists() -> None:
    lines = _ktl_lines()
    assert len(lines) >= 40
    for argv in lines:
        command = main.commands.get(argv[0])
        assert isinstance(command, click.Command), f"ktl {argv[0]} does not exist"
        if isinstance(command, click.Group):  # ktl witness serve, ktl trust list, ...
            sub = command.commands.get(argv[1])
            assert isinstance(sub, click.Command), f"ktl {argv[0]} {argv[1]} does not exist"
            command, argv = sub, argv[1:]
        known = {opt for p in command.params for opt in getattr(p, "opts", [])}
        for word in argv[1:]:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in known, f"ktl {argv[0]} has no option {word}"


def test_predicate_namespace_and_schemas_match() -> None:
    page = _page("publishing.md")
    assert f"`{PREDICATE_NAMESPACE}`" in page
    for kind in ("kernel", "benchmark", "verification", "reproduction", "suite"):
        assert f"`…/{kind}/v1`" in page
        assert (ROOT / "attest" / "schemas" / f"{kind}-v1.json").is_file()


def test_the_two_commands_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make demo" in README and "make test" in README


def test_make_test_leaves_the_slow_tests_to_a_ci_step_of_their_own() -> None:
    makefile = (ROOT / "Makefile").read_text()
    unit = re.search(r"^unit:.*\n\t(.*)$", makefile, re.M)
    slow = re.search(r"^slow:.*\n\t(.*)$", makefile, re.M)
    assert unit and "-m 'not slow and not faults'" in unit.group(1)
    assert slow and "-m 'slow and not faults'" in slow.group(1)
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.startswith("make ")]
    # The slow step gates like the others: a red slow test fails CI.
    assert steps[0] == "make test" and steps[1] == "make slow" and "make faults" in steps
    loop = re.search(r"^test-loop:.*\n\t(.*)$", makefile, re.M)  # development.md's 10-in-a-row loop
    script = ROOT / "benchmarks" / "test_loop.sh"
    assert loop and "benchmarks/test_loop.sh $(or $(RUNS),10)" in loop.group(1)
    assert script.stat().st_mode & 0o111 and "make -C \"$work/clone\" test" in script.read_text()
    assert "make test-loop RUNS=10" in _page("development.md")


def test_how_reproduce_decides_in_the_docs_is_the_code_s() -> None:
    from verifier.benchmark._runs import DEFAULT_RUNS
    from verifier.reproduce._verdict import speedup_verdict
    from verifier.stats import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE, simulated_rates

    text = " ".join(_page("reproducing.md").split())
    assert f"a speed-up claim is **{DEFAULT_RUNS} independent runs**" in text
    assert f"`ktl bench` makes {DEFAULT_RUNS} independent runs" in " ".join(
        _page("benchmarking.md").split())
    assert f"(`--tolerance`, default **{100 * DEFAULT_TOLERANCE:g} %**)" in text
    assert f"(`--confidence`, default **{100 * DEFAULT_CONFIDENCE:g} %**)" in text
    here = (0.43, 0.44, 0.425, 0.435, 0.43)  # the example reason's runs
    reason = speedup_verdict([1.25 * x for x in here], here).reason
    assert f"e.g. `{reason}`" in text
    assert simulated_rates(1.0, 0.01, 5, 20000, seed=5)["refuted"] == 0.0
    assert simulated_rates(1.0, 0.03, 5, 20000, seed=5)["refuted"] == 0.0
    rate = simulated_rates(1.0, 0.08, 5, 20000, seed=5)["refuted"]
    assert f"and in {100 * rate:.3g} % of them at 8 %" in text
