"""Commands of this area are registered here (see docs/CONTRACTS.md)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this module's commands to the `ktl` group."""
    del group
