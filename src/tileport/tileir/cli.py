"""`tileport irdiff A B`: diff two Tile IR programs and print / write the report.

`irdiff` is written for typer (annotated parameters) and returns the exit code: 0 PASS,
2 PASS_WITH_NOTES, 1 FAIL. Typer ignores return values, so mount `irdiff_command`, which exits
with that code:

    app.command("irdiff")(irdiff_command)
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from .diff import diff
from .reader import BytecodeError, read_module


def irdiff(
    a: Annotated[Path, typer.Argument(help="Reference Tile IR bytecode (.tileirbc / .bc).")],
    b: Annotated[Path, typer.Argument(help="Generated Tile IR bytecode (.tileirbc / .bc).")],
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the report as JSON.")] = None,
    md_out: Annotated[Optional[Path], typer.Option("--md", help="Write the report as markdown.")] = None,
    target: Annotated[str, typer.Option(help="GPU target whose optimization hints apply.")] = "sm_90",
) -> int:
    """Structurally diff reference Tile IR A against generated Tile IR B.

    An unreadable input is exit code 1, like a FAIL (exit 2 would read as PASS_WITH_NOTES).
    """
    console = Console()
    try:
        ref, gen = read_module(a), read_module(b)
    except (BytecodeError, OSError) as e:
        console.print(f"[red]cannot read Tile IR:[/] {e}")
        return 1
    report = diff(ref, gen, target=target)
    report.reference, report.generated = str(a), str(b)
    console.print(report)
    if json_out is not None:
        json_out.write_text(report.to_json() + "\n")
    if md_out is not None:
        md_out.write_text(report.to_markdown())
    return report.exit_code


# Same parameters as `irdiff` (typer reads them through `__wrapped__` and the copied annotations).
@functools.wraps(irdiff, assigned=("__annotations__",))
def irdiff_command(*args: Any, **kwargs: Any) -> None:
    """Structurally diff reference Tile IR A against generated Tile IR B (exit 0 PASS, 2 notes, 1 FAIL)."""
    raise typer.Exit(irdiff(*args, **kwargs))
