"""`ktl import kernelbench`: the fixtures in tests/kernelbench become kernel folders; what
cannot be mapped is refused with the reason, and the problem never runs in ktl's process."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import InputError
from client.kernelbench import (
    ImportOptions,
    ImportRefused,
    default_name,
    import_kernelbench,
    parse_probe,
    solution_runtime,
)
from verifier import KernelSpec
from verifier.runtimes import audit_solution
from verifier.runtimes._probe_child import probe as probe_child

FIXTURES = Path(__file__).resolve().parent / "kernelbench"
PROBLEMS = FIXTURES / "problems"
SOLUTIONS = FIXTURES / "solutions"
EXPECTED = {
    "layer_norm": ("torch", [("float32", (64, 512))], [(64, 512)]),
    "gelu": ("torch", [("float32", (32, 4096))], [(32, 4096)]),
    "softmax": ("torch", [("float32", (128, 1000))], [(128, 1000)]),
    "conv2d": ("torch", [("float32", (4, 8, 32, 32))], [(4, 16, 32, 32)]),
    "matmul_bias_relu": ("torch", [("float32", (128, 256))], [(128, 512)]),
    "mlp": ("torch", [("float32", (64, 128))], [(64, 10)]),
    "gelu_triton": ("triton", [("float32", (32, 4096))], [(32, 4096)]),
}


def _ktl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from client.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=240)


def _problem(tmp: Path, body: str, name: str = "problem.py") -> Path:
    path = tmp / name
    path.write_text("import torch\nimport torch.nn as nn\n\n" + body)
    return path


GOOD_MODEL = """
class Model(nn.Module):
    def forward(self, x):
        return x * 2
"""
GOOD_SOLUTION = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def _solution(tmp: Path) -> Path:
    path = tmp / "solution_in.py"
    path.write_text(GOOD_SOLUTION)
    return path


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n == "layer_norm" else pytest.mark.slow)
    for n in sorted(EXPECTED)])
def test_every_fixture_imports(tmp_path: Path, name: str) -> None:
    runtime, inputs, outputs = EXPECTED[name]
    result = import_kernelbench(PROBLEMS / f"{name}.py", SOLUTIONS / f"{name}.py", tmp_path / "k")
    spec = KernelSpec.load(tmp_path / "k")
    assert (spec.name, spec.op, spec.runtime, spec.dtype, spec.entry) == (
        f"local/{name}", "torch", runtime, "float32", "ModelNew")
    assert spec.reference_digest == hashlib.sha256((PROBLEMS / f"{name}.py").read_bytes()).hexdigest()
    assert (tmp_path / "k" / "solution.py").read_bytes() == (SOLUTIONS / f"{name}.py").read_bytes()
    assert [(t.dtype, t.shape) for t in result.problem.inputs] == inputs
    assert [t.shape for t in result.problem.outputs] == outputs
    assert result.problem.torch_version.startswith("2.")
    assert "get_inputs() when imported" in (tmp_path / "k" / "kernel.toml").read_text()


@pytest.mark.slow
def test_the_cli_writes_the_folder_and_refuses_a_full_one(tmp_path: Path) -> None:
    out = tmp_path / "ln"
    args = ["import", "kernelbench", str(PROBLEMS / "layer_norm.py"),
            str(SOLUTIONS / "layer_norm.py"), "--out", str(out), "--name", "acme/layernorm",
            "--agent", "kernelsmith", "--model", "m-2026"]
    done = _ktl(*args, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["name"], body["runtime"], body["dtype"]) == ("acme/layernorm", "torch", "float32")
    assert body["inputs"] == [{"kind": "tensor", "dtype": "float32", "shape": [64, 512]}]
    spec = KernelSpec.load(out)
    assert (spec.generator.agent, spec.generator.model) == ("kernelsmith", "m-2026")
    again = _ktl(*args)
    assert again.returncode == 2 and "exists and is not empty" in again.stderr
    assert KernelSpec.load(out) == spec


@pytest.mark.slow
def test_options_override_dtype_runtime_and_copy_sources(tmp_path: Path) -> None:
    cpp = tmp_path / "ln.cpp"
    cpp.write_text("// kernel\n")
    opts = ImportOptions(name="acme/gelu-half", dtype="float16", runtime="torch",
                         hardware_class="h100", extra_sources=(cpp,))
    result = import_kernelbench(PROBLEMS / "gelu.py", SOLUTIONS / "gelu.py", tmp_path / "k", opts)
    assert (result.spec.dtype, result.spec.hardware_class) == ("float16", "h100")
    assert result.spec.sources == ("reference.py", "solution.py", "ln.cpp")


def probe(path: str) -> dict[str, object]:
    """The sandboxed child's logic, run in this process (problems of this test only; the
    module it registers is removed again: the sandboxed test below asserts none is here)."""
    try:
        return probe_child(path, json.dumps({"call_bytes": 2**26, "param_bytes": 2**25,
                                             "flops": 10**9}))
    finally:
        sys.modules.pop("reference", None)


@pytest.mark.parametrize(("body", "message"), [
    ("def get_inputs():\n    return [torch.randn(2)]\ndef get_init_inputs():\n    return []\n",
     "does not define Model"),
    (GOOD_MODEL + "def get_init_inputs():\n    return []\n", "does not define get_inputs"),
    (GOOD_MODEL + "def get_inputs():\n    return [torch.randn(2)]\n",
     "does not define get_init_inputs"),
    ("class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
     "not a subclass of torch.nn.Module"),
    ("class Model(nn.Module):\n    def forward(self, x):\n        return str(x.sum())\n"
     "def get_inputs():\n    return [torch.randn(2)]\ndef get_init_inputs():\n    return []\n",
     "output 0 of Model.forward is a str, not a tensor or a number"),
    ("class Model(nn.Module):\n    def forward(self, x):\n        return {'y': x}\n"
     "def get_inputs():\n    return [torch.randn(2)]\ndef get_init_inputs():\n    return []\n",
     "not a tensor"),
    (GOOD_MODEL + "def get_inputs():\n    return [torch.randn(2, dtype=torch.float64)]\n"
     "def get_init_inputs():\n    return []\n", "are float64; ktl maps float32"),
    ("class Model(nn.Module):\n    def forward(self, x, y):\n        return x + y.float()\n"
     "def get_inputs():\n    return [torch.randn(2), torch.randn(2).half()]\n"
     "def get_init_inputs():\n    return []\n", "mix dtypes"),
    (GOOD_MODEL + "def get_inputs():\n    return [torch.arange(4)]\ndef get_init_inputs():\n"
     "    return []\n", "floating-point tensor"),
    (GOOD_MODEL + "def get_inputs():\n    return [[1, 2]]\ndef get_init_inputs():\n    return []\n",
     "hold a floating-point"),  # numbers out (mapped), but no float anywhere: no dtype
    ("class Model(nn.Module):\n    def forward(self, x):\n        return torch.zeros(2)\n"
     "def get_inputs():\n    return [object()]\ndef get_init_inputs():\n    return []\n",
     "get_inputs()[0] is a object"),
    (GOOD_MODEL + "def get_inputs():\n    return torch.randn(2)\ndef get_init_inputs():\n"
     "    return []\n", "must return a list or tuple"),
    (GOOD_MODEL + "def get_inputs():\n    raise ValueError('no')\ndef get_init_inputs():\n"
     "    return []\n", "get_inputs() raised ValueError: no"),
    ("raise SystemExit(3)\n", "exited with status 3"),
])
def test_unmappable_problems_are_refused(tmp_path: Path, body: str, message: str) -> None:
    """The probe's own logic, run here on problems of this test (the sandboxed run of the same
    code is tested below): each refusal names what cannot be mapped."""
    path = _problem(tmp_path, body)
    with pytest.raises(ImportRefused, match=re.escape(message)):
        if body.startswith("raise SystemExit"):
            import_kernelbench(path, _solution(tmp_path), tmp_path / "k")
        answer = probe(str(path))
        if answer.get("ok"):
            answer["plan"] = {"values": {}, "published": {}}
        parse_probe(json.dumps(answer)).dtype  # noqa: B018 (the property refuses)
    assert not (tmp_path / "k").exists()


@pytest.mark.slow
def test_a_refusal_in_the_sandbox_writes_nothing(tmp_path: Path) -> None:
    body = GOOD_MODEL + "def get_inputs():\n    return [torch.randn(2).double()]\n"
    with pytest.raises(ImportRefused, match="are float64"):
        import_kernelbench(_problem(tmp_path, body + "def get_init_inputs():\n    return []\n"),
                           _solution(tmp_path), tmp_path / "k")
    assert not (tmp_path / "k").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(("source", "message"), [
    ("import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n", "defines no ModelNew"),
    ("def f(:\n", "not valid Python"),
])
def test_solutions_without_modelnew_are_refused_before_running_anything(
        tmp_path: Path, source: str, message: str) -> None:
    solution = tmp_path / "s.py"
    solution.write_text(source)
    never = _problem(tmp_path, f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    with pytest.raises(ImportRefused, match=message):
        import_kernelbench(never, solution, tmp_path / "k")
    assert not (tmp_path / "ran").exists()


def test_modelnew_must_take_models_arguments() -> None:
    with pytest.raises(ImportRefused, match="takes 0 arguments but get_init_inputs"):
        solution_runtime(b"class ModelNew:\n    def __init__(self):\n        pass\n", 3)
    with pytest.raises(ImportRefused, match="needs 2 arguments but get_init_inputs"):
        solution_runtime(b"class ModelNew:\n    def __init__(self, a, b):\n        pass\n", 1)
    assert solution_runtime(b"class ModelNew:\n    def __init__(self, a, b=1):\n        pass\n", 1) == "torch"
    assert solution_runtime(b"class ModelNew:\n    def __init__(self, *a):\n        pass\n", 3) == "torch"


@pytest.mark.slow
def test_the_problem_runs_sandboxed_not_in_ktls_process(tmp_path: Path) -> None:
    """An attacker's problem: writes outside its folder, reads a secret beside ktl, leaks env."""
    secret = tmp_path / "secret.key"
    secret.write_text("hunter2")
    escape = tmp_path / "escaped"
    body = (
        "import os\n"
        f"try:\n    open({str(escape)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
        f"try:\n    leak = open({str(secret)!r}).read()\nexcept OSError:\n    leak = ''\n"
        "_shape = 3 if leak or os.environ.get('KTL_TEST_SECRET') else 2\n"
        + GOOD_MODEL +
        "def get_inputs():\n    return [torch.randn(_shape)]\n"
        "def get_init_inputs():\n    return []\n")
    result = import_kernelbench(_problem(tmp_path, body), _solution(tmp_path), tmp_path / "k")
    assert not escape.exists()
    assert result.problem.inputs[0].shape == (2,)
    assert "reference" not in sys.modules


def test_without_torch_the_import_says_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from client.cli import main\n"
            f"main(['import', 'kernelbench', {str(PROBLEMS / 'gelu.py')!r}, "
            f"{str(SOLUTIONS / 'gelu.py')!r}, '--out', {str(tmp_path / 'k')!r}])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "pip install 'kernel-transparency-log[torch]'" in done.stderr
    assert not (tmp_path / "k").exists()


def test_out_must_be_new_or_empty(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(ImportRefused, match="not empty"):
        import_kernelbench(PROBLEMS / "gelu.py", SOLUTIONS / "gelu.py", tmp_path / "full")
    assert (tmp_path / "full" / "x").read_text() == "keep me"
    (tmp_path / "file").write_text("")
    with pytest.raises(ImportRefused, match="not a folder"):
        import_kernelbench(PROBLEMS / "gelu.py", SOLUTIONS / "gelu.py", tmp_path / "file")
    with pytest.raises(InputError, match="--name"):
        import_kernelbench(PROBLEMS / "gelu.py", SOLUTIONS / "gelu.py", tmp_path / "k",
                           ImportOptions(name="Not A Name"))


def test_default_names_fit_the_kernel_name_alphabet() -> None:
    assert default_name(Path("19_ReLU.py")) == "local/19_relu"
    assert default_name(Path("Conv 2D (fast).py")) == "local/conv-2d-fast"
    assert default_name(Path("___.py")) == "local/kernel"


def test_imported_fixtures_audit_as_expected() -> None:
    assert audit_solution((SOLUTIONS / "gelu.py").read_bytes()) == ()


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not JSON"),
    ("[]", "malformed"),
    ('{"ok": false, "error": "the problem does not define Model"}', "does not define Model"),
    ('{"ok": false, "missing": "torch", "error": "x"}', "install torch"),
    ('{"ok": true, "inputs": [], "input_count": 1, "outputs": [], "output_count": 0, '
     '"init": [], "init_count": 0, "torch": "2", "parameters": []}', "has 1 items"),
    ('{"ok": true, "inputs": [{"kind": "tensor", "dtype": "float32", "shape": [-1]}], '
     '"input_count": 1, "outputs": [], "output_count": 0, "init": [], "init_count": 0, '
     '"torch": "2", "parameters": []}', "malformed"),
    ('{"ok": true, "inputs": [{"kind": "tensor", "dtype": "complex64", "shape": [2]}], '
     '"input_count": 1, "outputs": [{"kind": "tensor", "dtype": "float32", "shape": [2]}], '
     '"output_count": 1, "init": [], "init_count": 0, "torch": "2", "parameters": []}',
     "real tensors only"),
    ('{"ok": true, "inputs": [{"kind": "tensor", "dtype": "float32", "shape": [1,1,1,1,1,1,1,1,1]}], '
     '"input_count": 1, "outputs": [{"kind": "tensor", "dtype": "float32", "shape": [2]}], '
     '"output_count": 1, "init": [], "init_count": 0, "torch": "2", "parameters": []}',
     "9 dimensions"),
])
def test_the_probe_answer_is_checked_field_by_field(text: str, message: str) -> None:
    with pytest.raises(ImportRefused, match=message):
        parse_probe(text)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.sampled_from(["ok", "inputs", "input_count", "kind",
                                                        "dtype", "shape", "outputs", "type",
                                                        "value", "torch", "parameters"]),
                                       kids, max_size=6), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_any_probe_answer_is_mapped_or_refused(obj: object) -> None:
    with contextlib.suppress(ImportRefused):
        parse_probe(json.dumps(obj))


MARKUP = "[bold red]RED[/] [link=http://evil.example]click[/link]"


@pytest.mark.slow
def test_problem_chosen_text_is_printed_literally(tmp_path: Path) -> None:
    """Issue 42: a plain value the problem's get_inputs returns is shown as written: rich
    markup in it (`[bold red]`, `[link=...]`) is text, never obeyed (a sandboxed probe)."""
    problem = _problem(tmp_path, f"""
class Model(nn.Module):
    def forward(self, x, label):
        return x * 2

def get_inputs():
    return [torch.randn(4, 8), {MARKUP!r}]

def get_init_inputs():
    return []
""")
    done = subprocess.run([sys.executable, "-c", "from client.cli import main; main()",
                           "import", "kernelbench", str(problem), str(_solution(tmp_path)),
                           "--out", str(tmp_path / "k")], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "COLUMNS": "240"})
    assert done.returncode == 0, done.stderr
    assert f"'{MARKUP}'" in done.stdout, done.stdout  # whole, on one line, brackets and all
