"""The `tileport` command."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from tileport import toolchain

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Port cuTile Python kernels to cuTile Rust, and prove each port.")
console = Console()


@app.callback()
def main() -> None:
    """tileport: deterministic cuTile Python -> cuTile Rust porting with Tile IR proofs."""


@app.command()
def doctor() -> None:
    """Check every toolchain component; exit 1 if a required one is missing."""
    table = Table(title="tileport doctor")
    for col in ("", "component", "version", "path / how to fix"):
        table.add_column(col)
    missing = 0
    for c in toolchain.check_all():
        if c.ok:
            mark, detail = "[green]ok[/]", c.path
        elif c.required:
            mark, detail, missing = "[red]MISSING[/]", f"[red]{c.fix}[/]", missing + 1
        else:
            mark, detail = "[yellow]optional[/]", f"[yellow]{c.fix}[/]"
        table.add_row(mark, c.name, c.version or "-", detail)
    console.print(table)
    if missing:
        console.print(f"[red]{missing} required component(s) missing.[/] One command installs all: "
                      f"[bold]{toolchain.SETUP_COMMAND}[/]")
        raise typer.Exit(1)
    console.print("[green]toolchain complete[/]")


if __name__ == "__main__":
    app()
