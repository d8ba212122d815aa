"""`make demo`: the main job on the embedded default."""

from __future__ import annotations

import click


@click.command()
@click.option("--exit", "exit_when_done", is_flag=True, help="Exit when done instead of serving.")
def main(exit_when_done: bool) -> None:
    """Run the demo."""
    click.echo("The demo is assembled as the packages land; nothing to run yet.")
    del exit_when_done


if __name__ == "__main__":
    main()
