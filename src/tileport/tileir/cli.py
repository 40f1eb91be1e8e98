"""`tileport irdiff A B`: diff two Tile IR programs and print / write the report.

`irdiff` is written for typer (annotated parameters) and returns the exit code: 0 PASS,
2 PASS_WITH_NOTES, 1 FAIL. Typer ignores return values, so mount `irdiff_command`, which exits
with that code:

    app.command("irdiff")(irdiff_command)
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from .diff import diff
from .model import Module
from .reader import BytecodeError, read_module
from .roles import Roles, cutile_python_roles, manifest_generated_roles, manifest_variant


class ManifestError(ValueError):
    pass


def manifest_roles(manifest: Path, kernel: str | None, ref: Module, gen: Module) -> tuple[Roles, Roles]:
    """(reference roles, generated roles) of the parameters, from the crate manifest (kernels.json,
    or the crate directory holding it): what `verify` passes the diff."""
    path = manifest / "kernels.json" if manifest.is_dir() else manifest
    try:
        entries = json.loads(path.read_text())["entries"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ManifestError(f"{path}: not a readable crate manifest ({e})") from None
    if not gen.entries or not ref.entries:
        raise ManifestError("a module has no kernel entry")
    name = gen.entries[0].name
    candidates = [e for e in entries if kernel is None or e.get("kernel") == kernel]
    if not candidates:
        raise ManifestError(f"{path}: no kernel `{kernel}` (known: {', '.join(e.get('kernel', '?') for e in entries)})")
    for entry in candidates:
        variant = manifest_variant(entry, name)
        if variant is not None:
            return (cutile_python_roles(entry["params"], ref.entries[0]),
                    manifest_generated_roles(entry, variant, gen.entries[0]))
    raise ManifestError(f"{path}: no variant whose entry is @{name}"
                        + (f" in kernel `{kernel}`" if kernel else "") + " (pass --kernel NAME?)")


def irdiff(
    a: Annotated[Path, typer.Argument(help="Reference Tile IR bytecode (.tileirbc / .bc).")],
    b: Annotated[Path, typer.Argument(help="Generated Tile IR bytecode (.tileirbc / .bc).")],
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the report as JSON.")] = None,
    md_out: Annotated[Optional[Path], typer.Option("--md", help="Write the report as markdown.")] = None,
    target: Annotated[str, typer.Option(help="GPU target whose optimization hints apply.")] = "sm_90",
    manifest: Annotated[Optional[Path], typer.Option(
        help="The generated crate's kernels.json (or the crate directory): declares the shape/stride "
             "parameters of both entries, as `verify` does.")] = None,
    kernel: Annotated[Optional[str], typer.Option(
        help="The manifest kernel B was generated from (default: found by B's entry name).")] = None,
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
    ref_roles = gen_roles = None
    if manifest is not None:
        try:
            ref_roles, gen_roles = manifest_roles(manifest, kernel, ref, gen)
        except ManifestError as e:
            console.print(f"[red]--manifest:[/] {e}")
            return 1
    report = diff(ref, gen, target=target, reference_arg_roles=ref_roles, generated_arg_roles=gen_roles)
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
