"""`ktl ops`: the op catalogue as a kernel author needs it (C signature, dimensions, tolerance).

Everything shown is read from `verifier.ops`: the operands and dimension order of each
op, its constants (module constants named `<OP>_<NAME>`, e.g. `RMSNORM_EPS`) and the
first line of its tolerance function's documentation. The op table of docs/checks.md is
`ktl ops --markdown`, and a test keeps the two equal.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console

from client.output import Output, rows_table, run_guarded
from verifier import ops

COLUMNS = ("op", "C signature", "dimensions", "constants", "tolerance")


def catalogue() -> list[dict[str, Any]]:
    """One row per op of the catalogue, in catalogue order."""

    rows = []
    for name, op in ops.OPS.items():
        params = ([f"const float* {x.name}" for x in op.inputs]
                  + [f"float* {x.name}" for x in op.outputs]
                  + [f"int64_t {d}" for d in op.dims])
        operands = [f"{x.name}[{','.join(x.shape)}]" for x in (*op.inputs, *op.outputs)]
        prefix = name.upper() + "_"
        constants = {k[len(prefix):].lower(): v for k, v in vars(ops).items()
                     if k.startswith(prefix) and isinstance(v, int | float)}
        rows.append({
            "op": name,
            "signature": f"void f({', '.join(params)})",
            "operands": operands,
            "dims": list(op.dims),
            "constants": constants,
            "tolerance": (op.tolerance.__doc__ or "").strip().split("\n")[0],
        })
    return rows


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    constants = ", ".join(f"{k} = {v:g}" for k, v in row["constants"].items()) or "none"
    return (row["op"], row["signature"], f"{', '.join(row['dims'])}: {' '.join(row['operands'])}",
            constants, row["tolerance"])


def markdown_table() -> str:
    """The op table of docs/checks.md: the same cells as `ktl ops`, as Markdown."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in catalogue():
        op, sig, dims, constants, tol = (c.replace("|", "\\|") for c in _cells(row))
        lines.append(f"| `{op}` | `{sig}` | {dims} | {constants} | {tol} |")
    return "\n".join(lines) + "\n"


@click.command("ops")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@click.option("--markdown", is_flag=True, help="Print the README's Markdown table.")
def ops_cmd(as_json: bool, markdown: bool) -> None:
    """List every op a kernel can implement: C signature, dimension order, constants, tolerance.

    Runtime `c` entries take the inputs, then the outputs (float32, row-major,
    contiguous), then the dimensions as int64_t, in exactly this order.
    """
    out = Output(as_json)

    def body() -> int:
        rows = catalogue()
        if markdown and not as_json:
            click.echo(markdown_table(), nl=False)
            return 0

        def render(c: Console) -> None:
            c.print(rows_table("The op catalogue (verifier/ops.py)", COLUMNS,
                               [_cells(r) for r in rows]))

        out.result({"ops": rows}, render)
        return 0

    run_guarded(out, body)


def register(group: click.Group) -> None:
    """Add `ops` to the `ktl` group."""
    group.add_command(ops_cmd)
