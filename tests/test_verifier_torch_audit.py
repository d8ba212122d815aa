"""Static findings on torch/triton solutions: each kind has a solution that triggers it
and honest ones that do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.runtimes import FAILING_KINDS, FINDING_KINDS, Finding, audit_solution
from verifier.runtimes._torch_audit import MAX_AUDIT_BYTES, MAX_DEPTH, MAX_FINDINGS

FIXTURES = Path(__file__).resolve().parent / "kernelbench"
CUSTOM = ("layer_norm", "gelu", "softmax", "gelu_triton")
LIBRARY = ("conv2d", "matmul_bias_relu", "mlp")


def _kinds(source: bytes) -> set[str]:
    return {f.kind for f in audit_solution(source)}


@pytest.mark.parametrize("name", CUSTOM)
def test_honest_custom_kernels_have_no_findings(name: str) -> None:
    assert audit_solution((FIXTURES / "solutions" / f"{name}.py").read_bytes()) == ()


@pytest.mark.parametrize("name", LIBRARY)
def test_honest_library_candidates_are_named_torch_only(name: str) -> None:
    found = audit_solution((FIXTURES / "solutions" / f"{name}.py").read_bytes())
    assert [f.kind for f in found] == ["torch_only"]
    assert "PyTorch's own ops" in found[0].detail


@pytest.mark.parametrize(("fixture", "kind", "needle"), [
    ("fallback_try_except", "torch_fallback", "calls torch.nn.functional.gelu"),
    ("fallback_reference", "torch_fallback", "imports reference"),
    ("fallback_reference", "torch_fallback", "except handler"),
    ("torch_only", "torch_only", "no custom kernel"),
    ("unused_kernel", "torch_only", "ModelNew never calls it"),
    ("environment_read", "environment_read", "reads os.environ"),
    ("filesystem_read", "filesystem_read", "calls open"),
    ("filesystem_read", "filesystem_read", ".read_bytes()"),
    ("thread_start", "thread_start", "imports threading"),
    ("process_start", "thread_start", "calls os.fork"),
    ("introspection", "introspection", "imports gc"),
    ("introspection", "introspection", "sys._getframe"),
    ("introspection", "introspection", "reads .f_locals"),
    ("ctypes_use", "introspection", "imports ctypes"),
    ("patching", "patching", "replaces time.perf_counter_ns"),
    ("patching", "patching", "replaces torch.cuda.synchronize"),
    ("patching", "patching", "setattr() on torch"),
    ("dynamic_code", "dynamic_code", "calls exec"),
])
def test_each_flawed_solution_is_named(fixture: str, kind: str, needle: str) -> None:
    found = audit_solution((FIXTURES / "flawed" / f"{fixture}.py").read_bytes())
    assert any(f.kind == kind and needle in f.detail for f in found), found


def test_every_kind_has_a_flawed_fixture() -> None:
    seen = set().union(*(_kinds(p.read_bytes()) for p in (FIXTURES / "flawed").glob("*.py")))
    assert seen | {"unparsed"} == set(FINDING_KINDS)


def test_aliases_are_followed() -> None:
    src = b"import os as o\nfrom os import environ as e\nfrom time import sleep\nx = o.getenv('A')\ny = e['B']\n"
    found = audit_solution(src)
    assert [(f.kind, f.line) for f in found if f.kind == "environment_read"] == [
        ("environment_read", 4), ("environment_read", 5)]


def test_patching_through_submodule_aliases() -> None:
    src = b"import torch.cuda as tc\nimport torch.nn.functional as F\ntc.Event = None\nF.gelu = abs\n"
    details = {f.detail for f in audit_solution(src) if f.kind == "patching"}
    assert details == {"replaces torch.cuda.Event", "replaces torch.nn.functional.gelu"}


def test_assigning_attributes_of_own_objects_is_not_patching() -> None:
    src = (b"import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n"
           b"        super().__init__()\n        self.w = torch.zeros(3)\n")
    assert "patching" not in _kinds(src)


def test_a_try_without_torch_in_its_handler_is_no_fallback() -> None:
    src = (b"import torch\ntry:\n    import numpy\nexcept ImportError:\n    numpy = None\n")
    assert "torch_fallback" not in _kinds(src)


def test_unreadable_sources_are_unparsed_not_errors() -> None:
    cases = [b"def f(:\n", b"\xff\xfe", b"x = " + b"(" * (MAX_DEPTH + 1) + b")" * (MAX_DEPTH + 1),
             b"#" * (MAX_AUDIT_BYTES + 1)]
    for src in cases:
        found = audit_solution(src)
        assert len(found) == 1 and found[0].kind == "unparsed" and found[0].line == 0, found


def test_findings_are_capped() -> None:
    src = b"import os\n" + b"".join(b"a%d = os.environ\n" % i for i in range(500))
    found = audit_solution(src)
    assert len(found) == MAX_FINDINGS
    assert "more findings not listed" in found[-1].detail


def test_finding_to_json() -> None:
    assert Finding("patching", 3, "replaces time.time").to_json() == {
        "kind": "patching", "line": 3, "detail": "replaces time.time"}


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_give_findings_never_an_exception(data: bytes) -> None:
    found = audit_solution(data)
    assert all(f.kind in FINDING_KINDS and f.line >= 0 for f in found)
    assert len(found) <= MAX_FINDINGS


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="()[]{}ab=+,:\n .", max_size=600))
def test_any_text_gives_findings_never_an_exception(text: str) -> None:
    assert len(audit_solution(text.encode())) <= MAX_FINDINGS


def test_a_fallback_to_super_forward_is_named() -> None:
    src = (b"import torch\nclass ModelNew(Model):\n    def forward(self, x):\n        try:\n"
           b"            return kernel(x)\n        except Exception:\n"
           b"            return super().forward(x)\n")
    found = [f for f in audit_solution(src) if f.kind == "torch_fallback"]
    assert [(f.line, f.detail) for f in found] == [(7, "except handler (line 6) calls the reference")]


# Round 4: the audit follows what the code does, not how it is spelled.

@pytest.mark.parametrize(("fixture", "kind", "needle"), [
    ("alias_patching", "patching", "replaces torch.allclose"),
    ("alias_patching", "patching", "setattr() on torch.testing"),
    ("alias_patching", "patching", "replaces time.perf_counter_ns"),
    ("alias_patching", "patching", "replaces time.synchronize"),
    ("alias_patching", "patching", "replaces torch.synchronize"),
    ("computed_patching", "patching", "setattr() on torch with an attribute named at run time"),
    ("computed_patching", "patching", "vars().update() on time"),
    ("helper_fallback", "torch_fallback", "calls _retry(), which reaches torch.nn.functional.gelu"),
    ("worker_patch", "harness_access", "replaces __main__.read_frame"),
    ("worker_patch", "patching", "replaces __main__.read_frame"),
    ("opaque_exec", "opaque_code", "calls exec on text computed at run time"),
    ("opaque_exec", "patching", "replaces time.perf_counter"),
    ("device_twoface", "device_branch", "branches on .is_cuda"),
])
def test_round4_flawed_solution_is_named(fixture: str, kind: str, needle: str) -> None:
    found = audit_solution((FIXTURES / "flawed" / f"{fixture}.py").read_bytes())
    assert any(f.kind == kind and needle in f.detail for f in found), found


@pytest.mark.parametrize("fixture", ["alias_patching", "computed_patching", "helper_fallback",
                                     "worker_patch", "opaque_exec"])
def test_round4_forgeries_carry_a_failing_finding(fixture: str) -> None:
    found = audit_solution((FIXTURES / "flawed" / f"{fixture}.py").read_bytes())
    assert {f.kind for f in found} & FAILING_KINDS, found


def test_device_branches_are_evidence_not_failure() -> None:
    found = audit_solution((FIXTURES / "flawed" / "device_twoface.py").read_bytes())
    assert {f.kind for f in found} == {"device_branch"}
    assert "device_branch" not in FAILING_KINDS


@pytest.mark.parametrize(("src", "needle"), [
    (b"import __main__\n", "imports __main__"),
    (b"import sys\nm = sys.modules['__main__']\nm.write_frame = print\n", "__main__.write_frame"),
    (b"m = __import__('__main__')\n", "loads __main__"),
    (b"import importlib\nimportlib.import_module('verifier.worker')\n", "loads verifier.worker"),
    (b"import sys\nsys._getframe(1).f_globals['read_frame'] = print\n", ""),
])
def test_reaching_the_worker_is_named(src: bytes, needle: str) -> None:
    found = audit_solution(src)
    assert any(f.kind in ("harness_access", "patching") and needle in f.detail
               for f in found), found
    assert {f.kind for f in found} & FAILING_KINDS, found


@pytest.mark.parametrize("src", [
    b"import torch as t\nu = t\nsetattr(u, 'allclose', None)\n",
    b"import torch\nobject.__setattr__(torch, 'allclose', None)\n",
    b"import torch\ntorch.__setattr__('allclose', None)\n",
    b"import torch\ntorch.__dict__['allclose'] = None\n",
    b"import torch\nvars(torch)['allclose'] = None\n",
    b"import torch\ndef f(m=torch):\n    m.allclose = None\n",
    b"import torch, time\na, b = torch, time\nb.time = a.zeros\n",
    b"import torch\nclass M:\n    def __init__(self):\n        self.t = torch\n"
    b"    def go(self):\n        self.t.allclose = None\n",
    b"import torch\ng = getattr(torch, 'testing')\ng.assert_close = None\n",
    b"exec('import torch\\ntorch.allclose = None')\n",
    b"exec(compile('import time; time.time = None', 's', 'exec'))\n",
    b"import sys\nsys.modules['torch'] = None\n",
])
def test_patching_whatever_the_spelling(src: bytes) -> None:
    assert "patching" in _kinds(src), audit_solution(src)


@pytest.mark.parametrize("src", [
    b"import importlib\nname = input()\nimportlib.import_module(name)\n",
    b"import marshal\nexec(marshal.loads(b''))\n",
    b"code = open('x').read()\neval(code)\n",
])
def test_code_the_audit_cannot_see_fails(src: bytes) -> None:
    assert "opaque_code" in _kinds(src), audit_solution(src)


@pytest.mark.parametrize("src", [
    b"import torch\nx = getattr(torch, 'float16')\ny = torch.zeros(3)\ny.foo = 1\n",
    b"import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    b"        setattr(self, 'cache', None)\n        return x\n",
    b"import torch\ndef _alloc(x):\n    return torch.empty_like(x)\ntry:\n    pass\n"
    b"except Exception:\n    _alloc(1)\n",
    b"exec('x = 1')\n",
])
def test_honest_spellings_are_not_failures(src: bytes) -> None:
    assert not _kinds(src) & FAILING_KINDS, audit_solution(src)


def test_the_flow_is_bounded() -> None:
    chain = b"import torch\na0 = torch\n" + b"".join(b"a%d = a%d\n" % (i + 1, i) for i in range(300))
    src = chain + b"a300.allclose = None\n"
    assert audit_solution(src)  # bounded rounds: never an exception; may or may not follow
    inner = "x = 1"
    for _ in range(6):
        inner = f"exec({inner!r})"
    found = audit_solution(inner.encode() + b"\n")  # deeper than MAX_INLINE_ROUNDS: not read
    assert not {f.kind for f in found} & FAILING_KINDS, found
    patched = "import torch; torch.allclose = None"
    for _ in range(2):
        patched = f"exec({patched!r})"
    assert "patching" in _kinds(patched.encode())
