"""kernel.toml for kernels defined by a PyTorch module (op `torch`, runtimes torch/triton)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from verifier import KernelSpec, KernelSpecError, pack_kernel, unpack_kernel
from verifier.environment import environment_fingerprint, module_runtime_missing
from verifier.runtimes import get_runtime

TORCH = """
name = "acme/layernorm-fused"
version = "0.1.0"
op = "torch"
runtime = "torch"
reference = "reference.py"
solution = "solution.py"
sources = ["reference.py", "solution.py", "csrc/ln.cpp"]
entry = "ModelNew"
flags = []
dtype = "float32"

[generator]
agent = "kernelsmith"
agent_version = "0.3"
model = "m-2026"

[target]
hardware_class = "cpu"
"""

REFERENCE = b"import torch\nclass Model(torch.nn.Module):\n    pass\n"


def _folder(tmp: Path, manifest: str = TORCH) -> Path:
    (tmp / "csrc").mkdir(parents=True, exist_ok=True)
    (tmp / "kernel.toml").write_text(manifest)
    (tmp / "reference.py").write_bytes(REFERENCE)
    (tmp / "solution.py").write_text("class ModelNew:\n    pass\n")
    (tmp / "csrc" / "ln.cpp").write_text("// ln\n")
    return tmp


def test_torch_folder_loads_with_reference_digest(tmp_path: Path) -> None:
    spec = KernelSpec.load(_folder(tmp_path))
    assert (spec.op, spec.runtime, spec.entry) == ("torch", "torch", "ModelNew")
    assert (spec.reference, spec.solution, spec.dtype) == ("reference.py", "solution.py", "float32")
    assert spec.is_torch
    assert spec.reference_digest == hashlib.sha256(REFERENCE).hexdigest()
    assert KernelSpec.from_json(spec.to_json(), spec.directory) == spec


def test_triton_runtime_and_half_dtypes(tmp_path: Path) -> None:
    for dtype in ("float16", "bfloat16"):
        text = TORCH.replace('runtime = "torch"', 'runtime = "triton"').replace(
            'dtype = "float32"', f'dtype = "{dtype}"')
        spec = KernelSpec.load(_folder(tmp_path, text))
        assert (spec.runtime, spec.dtype) == ("triton", dtype)


def test_the_reference_digest_follows_the_file(tmp_path: Path) -> None:
    spec = KernelSpec.load(_folder(tmp_path))
    before = spec.reference_digest
    (tmp_path / "reference.py").write_bytes(REFERENCE + b"# changed\n")
    assert spec.reference_digest != before


def test_c_kernels_have_no_reference(tmp_path: Path) -> None:
    spec = KernelSpec.load(Path(__file__).resolve().parent.parent / "examples" / "sum-rows")
    assert (spec.reference, spec.solution, spec.dtype, spec.is_torch) == (None, None, None, False)
    with pytest.raises(KernelSpecError, match="has no reference module"):
        _ = spec.reference_digest
    assert "reference" not in spec.to_json()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('op = "torch"', 'op = "layernorm"', "op must be 'torch'"),
        ('op = "torch"', 'op = "softmax"', "op must be 'torch'"),
        ('runtime = "torch"', 'runtime = "c"', "needs runtime torch or triton"),
        ('reference = "reference.py"\n', "", r"needs \['reference'\]"),
        ('solution = "solution.py"\n', "", r"needs \['solution'\]"),
        ('dtype = "float32"\n', "", r"needs \['dtype'\]"),
        ('dtype = "float32"', 'dtype = "float64"', "dtype: 'float64' is not one of"),
        ('dtype = "float32"', 'dtype = "int8"', "dtype: 'int8' is not one of"),
        ('dtype = "float32"', "dtype = 32", "dtype: 32 is not one of"),
        ('entry = "ModelNew"', 'entry = "Model"', "loads the class 'ModelNew'"),
        ('reference = "reference.py"', 'reference = "ref.py"', "must be listed in sources"),
        ('solution = "solution.py"', 'solution = "csrc/ln.cpp"', "must be a .py file"),
        ('solution = "solution.py"', 'solution = "reference.py"', "two different files"),
        ("flags = []", 'flags = ["-O3"]', "takes no compiler flags"),
        ('"csrc/ln.cpp"', '"csrc/ln.rs"', "must end with one of"),
    ],
)
def test_torch_manifest_errors_name_the_field(tmp_path: Path, old: str, new: str,
                                              message: str) -> None:
    assert old in TORCH
    with pytest.raises(KernelSpecError, match=message):
        KernelSpec.load(_folder(tmp_path, TORCH.replace(old, new)))


def test_torch_keys_are_refused_on_c_kernels(tmp_path: Path) -> None:
    text = TORCH.replace('op = "torch"', 'op = "sum"').replace('runtime = "torch"', 'runtime = "c"')
    text = text.replace('"reference.py", "solution.py", "csrc/ln.cpp"', '"sum.c"').replace(
        'entry = "ModelNew"', 'entry = "sum_rows"')
    with pytest.raises(KernelSpecError, match="belong to runtimes torch/triton"):
        KernelSpec.parse(text.encode())


def test_missing_reference_file_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "reference.py").unlink()
    with pytest.raises(KernelSpecError, match=r"reference\.py is missing"):
        KernelSpec.load(folder)


def test_unknown_catalogue_op_points_at_torch(tmp_path: Path) -> None:
    text = TORCH.replace('op = "torch"', 'op = "layernorm"').replace(
        'runtime = "torch"', 'runtime = "c"')
    for line in ('reference = "reference.py"\n', 'solution = "solution.py"\n', 'dtype = "float32"\n'):
        text = text.replace(line, "")
    text = text.replace('"reference.py", "solution.py", "csrc/ln.cpp"', '"ln.c"')
    with pytest.raises(KernelSpecError, match="can be defined by a PyTorch module"):
        KernelSpec.parse(text.encode())


def test_pack_unpack_keeps_every_source(tmp_path: Path) -> None:
    data = pack_kernel(_folder(tmp_path / "src"))
    root = unpack_kernel(data, tmp_path / "out")
    spec = KernelSpec.load(root)
    assert set(spec.read_sources()) == {"reference.py", "solution.py", "csrc/ln.cpp"}
    assert spec.reference_digest == hashlib.sha256(REFERENCE).hexdigest()
    assert pack_kernel(root) == data


def test_without_torch_the_runtime_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    for runtime in ("torch", "triton"):
        reason = module_runtime_missing(runtime)
        assert reason is not None and "torch" in reason
        assert "pip install 'kernel-transparency-log[torch]'" in reason
        assert get_runtime(runtime).unavailable_reason() == reason
    assert module_runtime_missing("c") is None
    assert "torch" not in environment_fingerprint("torch")["libraries"]


def test_fingerprint_names_torch_for_torch_kernels() -> None:
    pytest.importorskip("torch", reason="torch is installed by `make test`")
    libraries = environment_fingerprint("torch")["libraries"]
    assert libraries["torch"].startswith("2.")
    assert "torch" not in environment_fingerprint("c")["libraries"]


def test_the_kernel_predicate_records_the_reference_as_the_op(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is installed by `make test`")
    from attest import AttestError, KernelPredicate

    spec = KernelSpec.load(_folder(tmp_path))
    body = spec.kernel_predicate("torch", "2.13.0").to_json()
    ref = body["reference"]
    assert ref["sha256"] == spec.reference_digest
    assert (ref["path"], ref["solution"], ref["dtype"]) == ("reference.py", "solution.py", "float32")
    assert ref["torch_version"].startswith("2.")
    pred = KernelPredicate.from_json(body)
    assert pred.to_json() == body
    bad = [
        ({k: v for k, v in body.items() if k != "reference"}, "reference: is required for op"),
        ({**body, "reference": {**ref, "sha256": "0" * 64}}, "must be the sha256 of source"),
        ({**body, "reference": {**ref, "solution": "reference.py"}}, "must name another"),
        ({**body, "runtime": "c"}, "goes with runtimes"),
    ]
    for edited, message in bad:
        with pytest.raises(AttestError, match=message):
            KernelPredicate.from_json(edited)


def test_c_kernel_predicates_carry_no_reference() -> None:
    from attest import AttestError, KernelPredicate

    spec = KernelSpec.load(Path(__file__).resolve().parent.parent / "examples" / "sum-rows")
    body = spec.kernel_predicate("gcc", "12").to_json()
    assert "reference" not in body
    assert KernelPredicate.from_json(body).to_json() == body
    ref = {"sha256": "0" * 64, "path": "sum.c", "solution": "sum.c", "torch_version": "2.13.0",
           "dtype": "float32"}
    with pytest.raises(AttestError, match="absent for every other op"):
        KernelPredicate.from_json({**body, "reference": ref})


def test_publishing_without_torch_says_what_to_install(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    spec = KernelSpec.load(_folder(tmp_path))
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(KernelSpecError, match="pip install 'kernel-transparency-log"):
        spec.kernel_predicate("torch", "unavailable")


def test_reproduce_times_a_torch_kernel_at_its_own_shapes(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim's shapes never reach bench for op 'torch' (it times get_inputs()'s shapes)."""
    import verifier.benchmark as benchmark
    from attest import BENCHMARK_V1
    from verifier.benchmark import BenchSettings
    from verifier.reproduce import reproduce_kernel

    seen: list[object] = []

    class Stop(Exception):
        pass

    def fake_bench_runs(kernel_dir: object, runs: int, settings: BenchSettings,
                        **kwargs: object) -> None:
        seen.append(settings.shapes)
        raise Stop

    monkeypatch.setattr(benchmark, "bench_runs", fake_bench_runs)
    from attest import examples as ex
    from attest.predicates import BenchmarkPredicate, ReproductionTarget

    claimed = ex.benchmark()
    claimed["workload"]["op"] = "torch"  # its shapes are the claim's, never bench's
    body = BenchmarkPredicate.from_json(claimed)
    target = ReproductionTarget(origin="example.test/log", index=1, leaf_hash="ab" * 32,
                                predicate_type=BENCHMARK_V1, subject_sha256="cd" * 32)
    folder = _folder(tmp_path)
    from verifier.runtimes import get_runtime

    if get_runtime("torch").unavailable_reason():
        pytest.skip("runtime torch unavailable here")
    with pytest.raises(Stop):
        reproduce_kernel(folder, [body], target)
    assert seen == [None]
