"""cli: the `ktl` command, one click group; each area registers its commands from its own module.

Holds the command modules (`keys`, `serve`, `repair`, `log`, `kernel`, `ops`,
`reproduce`, `trust`, `witness`, `importer`, `suite`). They parse options and print; the work is done by
the client's API modules (`client.publish`, `client.reproduce`, `client.monitor`, ...)
and by `attest`, `ledger` and `verifier`. Nothing outside `client.cli` imports it
(the `ktl` entry point is `client.cli:main`).
"""

from __future__ import annotations

import click

from client.cli import (
    importer,
    kernel,
    keys,
    log,
    ops,
    repair,
    reproduce,
    serve,
    suite,
    trust,
    witness,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernel-transparency-log", prog_name="ktl")
def main() -> None:
    """Kernel Transparency Log: publish, prove and reproduce claims about compute kernels."""


for _module in (keys, serve, repair, log, kernel, importer, ops, reproduce, trust, witness,
                suite):
    _module.register(main)
