"""The stated import direction, checked from the code's own imports (lazy ones included).

Packages: attest is the base; ledger and verifier import attest and not each other;
client imports the other three; nothing imports client; the pure verifying modules
import no web framework. Inside verifier the rooms point one way:
pure model <- sandbox <- worker <- runtimes | device <- checks | benchmark <- reproduce.
Inside every folder the modules import one way too (no circle, TYPE_CHECKING imports
included), and a folder is crossed only through its `__init__` (or a public module):
no private module or name of another folder is imported.
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
PURE_ATTEST = ("attest/dsse.py", "attest/entry.py", "attest/statement.py")
"""With every module of ledger/tlog (the pure protocol folder), what an auditor installs."""
WEB = {"flask", "werkzeug", "gunicorn", "jinja2", "requests"}
SERVICE = WEB | {"sqlite3", "sqlite_utils", "psycopg", "psycopg_pool", "urllib3", "http",
                 "socket", "click", "rich", "numpy"}


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


def _own_modules() -> dict[str, Path]:
    """Every module of the four packages by dotted name (a package by its own name)."""
    return {_module_name(path): path for package in PACKAGES for path in _modules(package)}


def _folder(module: str, modules: dict[str, Path]) -> str:
    """The folder a module lives in (a package is its own folder)."""
    path = modules.get(module)
    if path is not None and path.name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _named(module: str, modules: dict[str, Path]) -> str | None:
    """The module of ours an import names: itself, or its package for `from pkg import name`."""
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module or None


def circles_inside_folders(modules: dict[str, Path]) -> list[list[str]]:
    """The import circles among the plain modules of one folder (every import: at the top,
    inside functions, under TYPE_CHECKING), each as its modules in a cycle."""
    graph: dict[str, set[str]] = {name: set() for name, path in modules.items()
                                  if path.name != "__init__.py"}
    for name in graph:
        for _line, imported in _imports(modules[name]):
            there = _named(imported, modules)
            if there in graph and there != name \
                    and _folder(there, modules) == _folder(name, modules):
                graph[name].add(there)
    return _cycles(graph)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def private_crossings(modules: dict[str, Path], package: str) -> list[str]:
    """Imports in `package` of a private module or name of another folder of ours."""
    bad = []
    for name, path in modules.items():
        if name.split(".")[0] != package:
            continue
        here = _folder(name, modules)
        for line, imported in _imports(path):
            there = _named(imported, modules)
            if there is None or _folder(there, modules) == here:
                continue
            tail = imported[len(_folder(there, modules)):].lstrip(".").split(".")
            if any(part.startswith("_") and not part.startswith("__") for part in tail):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return bad


def test_no_import_circle_inside_any_folder() -> None:
    circles = circles_inside_folders(_own_modules())
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("package", PACKAGES)
def test_folders_are_crossed_only_through_their_init(package: str) -> None:
    bad = private_crossings(_own_modules(), package)
    assert not bad, "\n".join(bad)


def test_the_circle_and_crossing_checks_see_what_they_must(tmp_path: Path) -> None:
    """The checkers themselves: a circle through a TYPE_CHECKING import, and a private
    module of another folder, are caught; a folder's own private modules are not."""
    pkg = tmp_path / "verifier" / "room"
    pkg.mkdir(parents=True)
    (tmp_path / "verifier" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from verifier.room._a import A\n")
    (pkg / "_a.py").write_text("from verifier.room._b import B\nA = 1\n")
    (pkg / "_b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from verifier.room._a import A\nB = 2\n")
    (tmp_path / "verifier" / "top.py").write_text("from verifier.room._b import B\n")
    modules = {"verifier": tmp_path / "verifier" / "__init__.py",
               "verifier.room": pkg / "__init__.py", "verifier.room._a": pkg / "_a.py",
               "verifier.room._b": pkg / "_b.py", "verifier.top": tmp_path / "verifier" / "top.py"}
    assert circles_inside_folders(modules) == [["verifier.room._a", "verifier.room._b"]]
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert private_crossings(modules, "verifier") == ["verifier/top.py:1 imports verifier.room._b"]
    finally:
        ROOT = saved


OPTIONAL = ("torch", "triton", "psycopg", "psycopg_pool", "pynvml", "ledger.storage._postgres",
            "ledger.storage._pg_queue", "ledger.vindex._postgres")
"""Optional heavy dependencies: the only imports allowed inside functions without counting."""
MAX_IMPORTS_IN_FUNCTIONS = 81
MAX_MANY_PARAMETERS = 30
MAX_LONG_FUNCTIONS = 19
"""Ratchets: the tree meets them, and each may only go down (issue 39's aims: 40, 10, 5)."""


def _functions(package: str) -> list[tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((path, node))
    return found


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller passes: `self`/`cls` not counted, `*args` and `**options` one each."""
    a = fn.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (a.vararg is not None) + (a.kwarg is not None)


def imports_in_functions(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Modules of ours imported inside `fn` itself (not its nested functions), optional
    dependencies left out."""
    found = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            todo.extend(ast.iter_child_nodes(node))
            continue
        found += [n for n in names if n.split(".")[0] in PACKAGES
                  and not any(n == o or n.startswith(o + ".") for o in OPTIONAL)]
    return found


def test_imports_stay_at_the_top_of_modules() -> None:
    found = [f"{path.relative_to(ROOT)}:{fn.name} imports {m}" for package in PACKAGES
             for path, fn in _functions(package) for m in imports_in_functions(fn)]
    assert len(found) <= MAX_IMPORTS_IN_FUNCTIONS, "\n".join(found)


def test_few_functions_take_seven_or_more_parameters() -> None:
    found = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({parameter_count(fn)})"
             for package in PACKAGES for path, fn in _functions(package)
             if parameter_count(fn) >= 7]
    assert len(found) <= MAX_MANY_PARAMETERS, "\n".join(found)


def test_few_functions_run_over_sixty_lines() -> None:
    found = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}" for package in PACKAGES
             for path, fn in _functions(package)
             if (fn.end_lineno or fn.lineno) - fn.lineno + 1 > 60]
    assert len(found) <= MAX_LONG_FUNCTIONS, "\n".join(found)


def test_the_size_checks_count_what_they_must(tmp_path: Path) -> None:
    code = ("def f(self, a, b, *c, d, **e):\n    from verifier import x\n    import torch\n"
            "    def g():\n        from client import y\n    if a:\n        from ledger.tlog import z\n")
    fn = ast.parse(code).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert parameter_count(fn) == 5
    assert sorted(imports_in_functions(fn)) == ["ledger.tlog", "verifier"]


def test_packages_import_only_what_the_design_allows() -> None:
    bad = []
    for package in PACKAGES:
        for path in _modules(package):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in PACKAGES and top not in ALLOWED[package]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def _pure_verifying() -> list[Path]:
    return [*sorted((ROOT / "ledger" / "tlog").glob("*.py")), *(ROOT / p for p in PURE_ATTEST)]


def test_pure_verifying_modules_import_no_web_framework() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in _pure_verifying()
           for line, module in _imports(path) if module.split(".")[0] in WEB]
    assert not bad, "\n".join(bad)


def test_the_pure_protocol_folder_imports_only_itself_and_attest() -> None:
    """ledger/tlog is what an auditor installs: nothing of the service, the verifier or the
    client, and no database, web, HTTP or terminal library."""
    bad = []
    for path in sorted((ROOT / "ledger" / "tlog").glob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            ours_elsewhere = top in PACKAGES and not (module.startswith("ledger.tlog")
                                                      or top == "attest")
            if ours_elsewhere or top in SERVICE:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert len(list((ROOT / "ledger" / "tlog").glob("*.py"))) >= 9
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
