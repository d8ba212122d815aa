"""The `ktl` command: one click group; each area registers its commands from its own module."""

from __future__ import annotations

import click

from client import (
    _cmd_kernel,
    _cmd_keys,
    _cmd_log,
    _cmd_ops,
    _cmd_repair,
    _cmd_reproduce,
    _cmd_serve,
    _cmd_trust,
    _cmd_witness,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernel-transparency-log", prog_name="ktl")
def main() -> None:
    """Kernel Transparency Log: publish, prove and reproduce claims about compute kernels."""


for _module in (_cmd_keys, _cmd_serve, _cmd_repair, _cmd_log, _cmd_kernel, _cmd_ops,
                _cmd_reproduce, _cmd_trust, _cmd_witness):
    _module.register(main)
