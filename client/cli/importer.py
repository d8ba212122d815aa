"""`ktl import kernelbench PROBLEM.py SOLUTION.py --out DIR`: a KernelBench-format problem and
solution become a kernel folder of runtime torch (or triton).

The problem runs only in a sandboxed child (its inputs' dtypes and shapes are read from
`get_inputs()` there); the solution is read, never run. Exit codes: 0 written; 2 what
cannot be mapped, with the reason (nothing is written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from client.kernelbench import ImportOptions, ImportResult, import_kernelbench
from client.output import Output, run_guarded, safe

_FILE = click.Path(path_type=Path, dir_okay=False)


@click.group("import")
def import_group() -> None:
    """Turn kernels written for other harnesses into ktl kernel folders."""


@import_group.command("kernelbench")
@click.argument("problem", type=_FILE)
@click.argument("solution", type=_FILE)
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The kernel folder to write (new, or an empty folder).")
@click.option("--name", default=None, metavar="VENDOR/KERNEL",
              help="The kernel's name [default: local/<problem file name>].")
@click.option("--version", "version", default="0.1.0", show_default=True)
@click.option("--runtime", type=click.Choice(["torch", "triton"]), default=None,
              help="[default: triton when the solution imports triton, else torch]")
@click.option("--dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default=None,
              help="[default: the dtype of get_inputs()'s floating-point tensors]")
@click.option("--hardware-class", default="cpu", show_default=True,
              help="The target recorded in kernel.toml (cpu, or a GPU class).")
@click.option("--agent", default="unknown", show_default=True, help="Who wrote the solution.")
@click.option("--agent-version", default="0", show_default=True)
@click.option("--model", default="unknown", show_default=True, help="The model behind the agent.")
@click.option("--source", "sources", multiple=True, type=_FILE,
              help="A .cpp/.cu/.h file the solution reads, copied beside it (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def kernelbench_cmd(problem: Path, solution: Path, out_dir: Path, sources: tuple[Path, ...],
                    as_json: bool, **options: Any) -> None:
    """Write a kernel folder from a KernelBench PROBLEM (Model, get_inputs, get_init_inputs)
    and SOLUTION (ModelNew)."""
    out = Output(as_json)
    opts = ImportOptions(extra_sources=tuple(sources), **options)
    run_guarded(out, lambda: _show_import(out, out_dir, _imported(out, problem, solution,
                                                                  out_dir, opts)))


def _imported(out: Output, problem: Path, solution: Path, out_dir: Path,
              opts: ImportOptions) -> ImportResult:
    out.note("running the problem's get_inputs() in the sandbox…", "dim")
    return import_kernelbench(problem, solution, out_dir, opts)


def _show_import(out: Output, out_dir: Path, result: ImportResult) -> int:
    def render(console: Console) -> None:
        spec = result.spec
        table = Table(title=safe(f"ktl import kernelbench: {spec.name} ({spec.runtime}, "
                                 f"{spec.dtype}, torch {result.problem.torch_version})"),
                      title_justify="left")
        for col in ("", "#", "kind", "dtype / type", "shape / value"):
            table.add_column(col)
        for label, items in (("input", result.problem.inputs),
                             ("output", result.problem.outputs)):
            for i, t in enumerate(items):
                shape = (f"[{', '.join(map(str, t.shape))}]" if t.kind == "tensor"
                         else repr(t.value))
                table.add_row(label, str(i), t.kind, safe(t.dtype or ""), safe(shape))
        console.print(table)
        console.print(safe(f"reference sha256 (the op): {spec.reference_digest}"),
                      highlight=False)
        console.print(safe(f"wrote {result.directory}/kernel.toml with "
                           f"{', '.join(spec.sources)}"), highlight=False)
        console.print(safe(f"next: ktl check {out_dir}"), highlight=False)

    out.result(result.to_json(), render)
    return 0


def register(group: click.Group) -> None:
    """Add `import kernelbench` to the `ktl` group."""
    group.add_command(import_group)
