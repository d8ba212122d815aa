"""The stated import direction, checked from the code's own imports (lazy ones included).

Packages: attest is the base; ledger and verifier import attest and not each other;
client imports the other three; nothing imports client; the pure verifying modules
import no web framework. Inside verifier the rooms point one way:
pure model <- sandbox <- worker <- runtimes | device <- checks | benchmark <- reproduce.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attest", "ledger", "client", "verifier")
ALLOWED = {
    "attest": {"attest"},
    "ledger": {"attest", "ledger"},
    "verifier": {"attest", "verifier"},
    "client": {"attest", "ledger", "verifier", "client"},
}
ROOM_RANK = {"model": 0, "sandbox": 1, "worker": 2, "runtimes": 3, "device": 3, "checks": 4,
             "proofs": 3,
             "benchmark": 4,
             "reproduce": 5, "top": 6}
MAX_MODULES_PER_FOLDER = 15
PURE_VERIFYING = ("ledger/merkle.py", "ledger/note.py", "ledger/checkpoint.py",
                  "ledger/cosignature.py", "ledger/proof_bundle.py", "attest/dsse.py",
                  "attest/entry.py", "attest/statement.py")
WEB = {"flask", "werkzeug", "gunicorn", "jinja2", "requests"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module named by an import in `path`, with its line (inside functions too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from verifier import _gpu` names the module _gpu, not the package's top
            submodules = [f"{node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
            if len(submodules) < len(node.names):
                found.append((node.lineno, node.module))
            found += [(node.lineno, name) for name in submodules]
    return found


def _room(module: str) -> str:
    """The room of a dotted module name inside verifier."""
    parts = module.split(".")
    if len(parts) == 1:
        return "top"
    if parts[1] in ROOM_RANK:
        return parts[1]
    return "model"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def test_packages_import_only_what_the_design_allows() -> None:
    bad = []
    for package in PACKAGES:
        for path in _modules(package):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in PACKAGES and top not in ALLOWED[package]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_pure_verifying_modules_import_no_web_framework() -> None:
    bad = [f"{rel}:{line} imports {module}" for rel in PURE_VERIFYING
           for line, module in _imports(ROOT / rel) if module.split(".")[0] in WEB]
    assert not bad, "\n".join(bad)


def test_verifier_rooms_import_one_way() -> None:
    bad = []
    for path in _modules("verifier"):
        here = _room(_module_name(path))
        for line, module in _imports(path):
            if not module.startswith("verifier.") and module != "verifier":
                continue
            there = _room(module)
            if there == here:
                continue
            wrong = ROOM_RANK[there] >= ROOM_RANK[here] and here != "top"
            if wrong:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {module} ({there})")
    assert not bad, "\n".join(bad)


def test_the_direction_check_sees_a_wrong_import(tmp_path: Path) -> None:
    """The checker itself: a model module importing a room is caught."""
    wrong = tmp_path / "ops.py"
    wrong.write_text("def f():\n    from verifier.runtimes import get_runtime\n")
    assert (2, "verifier.runtimes") in _imports(wrong)
    assert ROOM_RANK[_room("verifier.runtimes")] > ROOM_RANK[_room("verifier.ops")]
    private = tmp_path / "x.py"
    private.write_text("from verifier import _gpu\n")
    assert (1, "verifier._gpu") in _imports(private)


@pytest.mark.parametrize("package", PACKAGES)
def test_folders_hold_at_most_about_fifteen_modules(package: str) -> None:
    folders = {path.parent for path in _modules(package)}
    crowded = {str(f.relative_to(ROOT)): n for f in folders
               if (n := sum(1 for p in f.glob("*.py") if p.name != "__init__.py"))
               > MAX_MODULES_PER_FOLDER}
    assert not crowded, crowded


@pytest.mark.parametrize("package", ["verifier", "client"])
def test_every_room_says_what_it_holds_and_may_import(package: str) -> None:
    for init in (ROOT / package).rglob("__init__.py"):
        if init.parent == ROOT / package:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "Holds" in doc, f"{init.relative_to(ROOT)}: its docstring says not what it holds"
        assert "import" in doc, f"{init.relative_to(ROOT)}: its docstring says nothing of imports"
