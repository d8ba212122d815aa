"""The committed KernelBench-layout suite (tests/kernelbench_suite, problems written here) in
the forms that failed on the public dataset: tuple init arguments, convolution with kernel
tuples, 3-D/4-D inputs, GPU-sized constants, 0-dim outputs, a Python number as output,
several outputs, a string
forward argument, torch.rand inputs, a whole small model. Every problem imports; an honest
solution (its Model renamed ModelNew) passes `check`, a wrong one fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.kernelbench import (
    SCALAR_ADAPTER_MARK,
    ImportRefused,
    import_kernelbench,
    scalar_adapter,
)
from verifier.checks import check
from verifier.runtimes import CHECK_BUDGET, probe_problem

SUITE = Path(__file__).resolve().parent / "kernelbench_suite"
PROBLEMS = sorted(p.relative_to(SUITE) for p in SUITE.glob("level*/*.py"))
HONEST = SUITE / "solutions" / "honest"
WRONG = SUITE / "solutions" / "wrong"


def test_the_suite_has_an_honest_and_a_wrong_solution_per_problem() -> None:
    assert len(PROBLEMS) >= 6
    for rel in PROBLEMS:
        assert (HONEST / rel).is_file() and (WRONG / rel).is_file(), rel
        assert "class ModelNew(" in (HONEST / rel).read_text()


def _import(rel: Path, tmp: Path, wrong: bool = False) -> Path:
    out = tmp / ("wrong" if wrong else "honest")
    import_kernelbench(SUITE / rel, (WRONG if wrong else HONEST) / rel, out)
    return out


@pytest.mark.slow
def test_tuple_init_arguments_are_recorded_and_passed_as_tuples(tmp_path: Path) -> None:
    result = import_kernelbench(SUITE / "level1/2_LayerNorm_tuple_shape.py",
                                HONEST / "level1/2_LayerNorm_tuple_shape.py", tmp_path / "k")
    (init,) = result.problem.init
    assert init.kind == "value" and init.value == {"tuple": [4, 6, 10]}
    assert "tuple (4, 6, 10)" in (tmp_path / "k" / "kernel.toml").read_text()
    conv = import_kernelbench(SUITE / "level1/1_Conv2d_tuple_kernel.py",
                              HONEST / "level1/1_Conv2d_tuple_kernel.py", tmp_path / "c")
    assert [t.describe() for t in conv.problem.init][2:] == [
        "tuple (3, 5)", "tuple (1, 2)", "tuple (1, 2)"]
    assert conv.problem.outputs[0].shape == (2, 5, 19, 12)


@pytest.mark.slow
def test_zero_dim_outputs_several_outputs_and_a_string_argument(tmp_path: Path) -> None:
    ce = import_kernelbench(SUITE / "level1/4_CrossEntropy_0dim.py",
                            HONEST / "level1/4_CrossEntropy_0dim.py", tmp_path / "ce")
    assert ce.problem.outputs[0].shape == ()
    two = import_kernelbench(SUITE / "level2/1_Matmul_two_outputs.py",
                             HONEST / "level2/1_Matmul_two_outputs.py", tmp_path / "two")
    assert [o.shape for o in two.problem.outputs] == [(4, 9, 17), (4, 9)]
    assert two.problem.inputs[1].kind == "value" and two.problem.inputs[1].value == "relu"
    rel = Path("level1/5_Mean_scalar.py")
    mean = import_kernelbench(SUITE / rel, HONEST / rel, tmp_path / "mean")
    assert [(o.kind, o.dtype) for o in mean.problem.outputs] == [("scalar", "float")]
    for name in ("reference.py", "solution.py"):
        assert SCALAR_ADAPTER_MARK in (tmp_path / "mean" / name).read_text()
    assert "compared as 0-dim tensors" in (tmp_path / "mean" / "kernel.toml").read_text()


def test_numbers_returned_by_forward_become_0_dim_tensors_of_the_same_value() -> None:
    """The lines the importer appends where forward returns a Python number: a float at the
    kernel's dtype, an int as int64, a bool as bool, inside tuples too; tensors unchanged."""
    torch = pytest.importorskip("torch")
    source = ("import torch\nclass Model(torch.nn.Module):\n"
              "    def forward(self, x, how):\n"
              "        return {'f': 1.5, 'i': 7, 'b': True, 't': (2.5, x), 'x': x}[how]\n")
    space: dict[str, object] = {}
    exec(compile(source.encode() + scalar_adapter("Model", "float16"), "ref", "exec"), space)
    model = space["Model"]()  # type: ignore[operator]
    x = torch.ones(2)
    f, i, b = (model(x, k) for k in "fib")
    assert (f.dtype, f.shape, float(f)) == (torch.float16, torch.Size([]), 1.5)
    assert (i.dtype, int(i)) == (torch.int64, 7) and (b.dtype, bool(b)) == (torch.bool, True)
    first, second = model(x, "t")
    assert first.dtype == torch.float16 and second is x and model(x, "x") is x


@pytest.mark.slow
def test_gpu_sized_problem_is_scaled_from_its_own_constants_and_says_so(tmp_path: Path) -> None:
    rel = Path("level1/3_Sigmoid_rand_gpu_sized.py")
    result = import_kernelbench(SUITE / rel, HONEST / rel, tmp_path / "k")
    plan = result.problem.scale
    assert plan.published == {"batch_size": 4096, "dim": 393217}
    assert plan.published_footprint is not None
    assert plan.published_footprint.call_bytes == 2 * 4 * 4096 * 393217
    assert plan.scaled and plan.footprint is not None and plan.footprint.fits(CHECK_BUDGET)
    dim = plan.run_values()["dim"]
    assert isinstance(dim, int) and dim % 2 == 1 and dim >= 64  # odd stays odd, not below 64
    text = plan.describe()
    assert text.startswith("checked at batch_size=") and "the problem's dim is 393,217" in text
    assert result.problem.inputs[0].shape == (plan.run_values()["batch_size"], dim)
    assert (SUITE / rel).read_bytes() == (tmp_path / "k" / "reference.py").read_bytes()


@pytest.mark.slow
def test_a_module_that_reads_a_value_in_its_constructor_is_still_scaled() -> None:
    """Swin's constructor calls `.item()` on a drop-path schedule, which the meta device
    cannot answer: the module is built on the CPU and moved to meta, so its call is measured
    and scaled (KernelBench's SwinMLP ran unscaled at batch 10 and ran out of memory)."""
    body = ("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
            "    def __init__(self, features):\n        super().__init__()\n"
            "        rates = [x.item() for x in torch.linspace(0, 0.1, 3)]\n"
            "        self.scale = 1.0 + rates[1]\n"
            "        self.linear = nn.Linear(features, features)\n"
            "    def forward(self, x):\n        return self.linear(x) * self.scale\n"
            "batch_size = 65536\nfeatures = 1024\n"
            "def get_inputs():\n    return [torch.rand(batch_size, features)]\n"
            "def get_init_inputs():\n    return [features]\n")
    probe = probe_problem(body.encode(), CHECK_BUDGET)
    plan = probe.plan
    assert plan.published_footprint is not None and plan.footprint is not None, plan
    assert plan.published_footprint.call_bytes == 2 * 65536 * 1024 * 4
    assert plan.footprint.fits(CHECK_BUDGET) and plan.run_values()["batch_size"] < 65536


@pytest.mark.slow
def test_a_call_that_fits_nowhere_is_refused_in_bytes_not_a_signal(tmp_path: Path) -> None:
    """A huge problem with no constant to scale: 8 GiB a call, measured on the meta device in
    a sandbox of a few GiB (nothing allocated), refused with the numbers."""
    body = ("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return x + 1\n"
            "def get_inputs():\n    return [torch.rand(32768, 32768)]\n"
            "def get_init_inputs():\n    return []\n")
    with pytest.raises(Exception, match=r"one call needs 8\.00 GiB of inputs and outputs.*"
                                        r"the limit is 64\.0 MiB a call.*this machine has"):
        probe_problem(body.encode(), CHECK_BUDGET)
    (tmp_path / "p.py").write_text(body)
    (tmp_path / "s.py").write_text(body.replace("class Model(", "class ModelNew("))
    with pytest.raises(ImportRefused, match=r"8\.00 GiB") as info:
        import_kernelbench(tmp_path / "p.py", tmp_path / "s.py", tmp_path / "k")
    assert "signal" not in str(info.value) and info.value.kind == "does_not_fit"
    assert not (tmp_path / "k").exists()


@pytest.mark.slow
@pytest.mark.parametrize("rel", PROBLEMS, ids=[p.stem for p in PROBLEMS])
def test_honest_passes_and_wrong_fails(tmp_path: Path, rel: Path) -> None:
    honest = check(_import(rel, tmp_path), "quick", seed=7)
    # no row fails; the one error a loaded machine may cause is the harness's own: two
    # threads' calls never seen at once (`concurrency` not established), never a fail
    assert not [c for c in honest.checks if c.outcome == "fail"], \
        [(c.name, c.detail[:300]) for c in honest.checks if c.outcome == "fail"]
    assert all(c.outcome in ("pass", "skip") or (c.name, c.outcome) == ("concurrency", "error")
               for c in honest.checks), [(c.name, c.outcome, c.detail[:300])
                                         for c in honest.checks if c.outcome != "pass"]
    reference = next(c for c in honest.checks if c.name == "reference")
    assert reference.detail.startswith("checked at ")
    wrong = check(_import(rel, tmp_path, wrong=True), "quick", seed=7)
    assert not wrong.passed
    assert all(c.outcome != "error" for c in wrong.checks), "a wrong kernel is a fail, not an error"


@pytest.mark.slow
def test_the_bench_runs_at_the_published_shape_or_refuses_naming_the_memory(
        tmp_path: Path) -> None:
    """A bench is a claim about the problem's own shapes: never scaled; refused in bytes."""
    from verifier import BenchSettings, VerifierError, bench_runs

    kernel = _import(Path("level1/3_Sigmoid_rand_gpu_sized.py"), tmp_path)
    with pytest.raises(VerifierError, match=r"not benchmarked at the problem's own sizes: one "
                                            r"call needs 12\.00 GiB.*the limit is"):
        bench_runs(kernel, 1, BenchSettings(time_budget_s=1.0))
