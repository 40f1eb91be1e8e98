"""The `tileport` command."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tileport import toolchain
from tileport.tileir.cli import irdiff_command  # typer needs its signature now (imports the Tile IR toolkit)

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


def _print_translation(report) -> None:
    table = Table(title="translation")
    for col in ("file", "kernel", "status", "entries / diagnostic"):
        table.add_column(col)
    for r in report.results:
        if r.ok:
            table.add_row(Path(r.file).name, r.kernel, "[green]ok[/]", ", ".join(r.entries))
        else:
            table.add_row(Path(r.file).name, r.kernel, "[red]failed[/]", escape(str(r.diagnostic)))
    console.print(table)


@app.command()
def translate(
    files: Annotated[Optional[list[Path]], typer.Argument(help="cuTile Python files to translate.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output crate directory.")] = Path("out/crate"),
    corpus: Annotated[bool, typer.Option(help="Translate the reference corpus into rust/.")] = False,
    crate: Annotated[str, typer.Option(help="Name of the generated crate.")] = "tileport_kernels",
    check: Annotated[bool, typer.Option(help="With --corpus: fail if rust/ differs from a fresh translation.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help="Configurations (dtypes, constant values) "
                                                   "per kernel: JSON, TOML or YAML (README, 'Configurations').")] = None,
) -> None:
    """Translate cuTile Python kernels to a cutile-rs crate (device code, C-ABI launchers, manifest)."""
    from tileport.translate import translate as run
    t0 = time.perf_counter()
    if corpus:
        from tileport.corpus import REPO, translate_corpus
        if check:
            raise typer.Exit(_check_drift(REPO / "rust"))
        report = translate_corpus(REPO / "rust" if out == Path("out/crate") else out)
    else:
        if not files:
            console.print("[red]give cuTile Python files, or --corpus[/]")
            raise typer.Exit(2)
        missing = [f for f in files if not f.is_file()]
        if missing:
            console.print(f"[red]no such file:[/] {', '.join(map(str, missing))}")
            raise typer.Exit(2)
        configs = _load_configs(config) if config else {}
        report = run([str(f) for f in files], out, {str(f): configs for f in files}, crate=crate)
    _print_translation(report)
    n_ok = sum(r.ok for r in report.results)
    where = report.written[0].parent if report.written else out
    console.print(f"{n_ok}/{len(report.results)} kernels translated in {time.perf_counter() - t0:.2f} s"
                  + (f"; crate written to {where}" if report.written else ""))
    raise typer.Exit(0 if report.ok else 1)


def _load_configs(path: Path) -> dict:
    from tileport.config import ConfigError, kernel_configs, load_config
    try:
        return kernel_configs(load_config(path))
    except ConfigError as e:
        console.print(f"[red]--config {escape(str(e))}[/]")
        raise typer.Exit(2) from None


def _check_drift(crate_dir: Path) -> int:
    from tileport.corpus import translate_corpus
    from tileport.emit.crate import format_crate
    report = translate_corpus(None)
    files = format_crate(report.files)
    drift = [rel for rel, text in files.items()
             if not (crate_dir / rel).is_file() or (crate_dir / rel).read_text() != text]
    extra = sorted(str(p.relative_to(crate_dir)) for p in (crate_dir / "src").glob("*.rs")
                   if str(p.relative_to(crate_dir)) not in report.files)
    if drift or extra:
        console.print(f"[red]rust/ differs from the translator's output:[/] {', '.join(drift + extra)}\n"
                      "run: tileport translate --corpus")
        return 1
    console.print(f"[green]rust/ matches the translator's output ({len(report.files)} files)[/]")
    return 0


@app.command()
def build(
    crate: Annotated[Path, typer.Option(help="Crate directory.")] = Path("rust"),
    profile: Annotated[str, typer.Option(help="release or dev")] = "release",
) -> None:
    """Build the generated cdylib with cargo (incremental)."""
    from tileport.runtime.library import BuildError
    from tileport.runtime.library import build as do_build
    try:
        with console.status(f"cargo build ({profile})"):
            so = do_build(crate, profile)
    except BuildError as e:
        console.print(f"[red]{e}[/]")
        raise typer.Exit(1) from None
    console.print(f"built {so} ({so.stat().st_size / 1e6:.1f} MB)")


@app.command()
def verify(
    corpus: Annotated[bool, typer.Option(help="Verify every capture of the reference corpus.")] = True,
    out: Annotated[Path, typer.Option("--out", "-o", help="Artifacts directory.")] = Path("out/verify"),
    kernel: Annotated[Optional[list[str]], typer.Option(help="Only these kernels.")] = None,
    jobs: Annotated[int, typer.Option("-j", help="Captures in parallel.")] = 2,
    profile: Annotated[str, typer.Option(help="Cargo profile of the library.")] = "release",
) -> None:
    """CPU proof of the corpus ports: IR both sides, cubins (sm_80/90/100), structural IR diff."""
    from tileport.corpus import REPO, captures_by_kernel
    from tileport.ops.specs import all_specs
    from tileport.runtime.library import load
    from tileport.verify import verify_all, write_summary
    with console.status("building the generated crate"):
        lib = load(REPO / "rust", profile=profile)
    items = [(path, c) for k, (path, caps) in captures_by_kernel(all_specs()).items()
             if not kernel or k in kernel for c in caps]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("verifying captures", total=len(items))
        results = verify_all(lib, items, out, jobs, lambda r: progress.advance(task))
    table = Table(title="Tile IR: cuTile Python vs cutile-rs port")
    for col in ("capture", "verdict", "crit", "warn", "info", "cubins gen", "same SASS", "note"):
        table.add_column(col)
    for r in results:
        color = {"PASS": "green", "PASS_WITH_NOTES": "yellow"}.get(r.verdict, "red")
        cubins = " ".join(a for a, ok in r.cubins_gen.items() if ok)
        same = " ".join(a for a, ok in r.sass_same.items() if ok) or "-"
        note = r.error or (r.findings[0] if r.findings else "")
        table.add_row(escape(r.capture), f"[{color}]{r.verdict}[/]", str(r.critical), str(r.warn), str(r.info),
                      cubins, same, escape(note[:80]))
    console.print(table)
    summary = write_summary(results, out)
    bad = [r for r in results if r.verdict not in ("PASS", "PASS_WITH_NOTES") or r.error]
    same = sum(1 for r in results if r.sass_same and all(r.sass_same.values()))
    console.print(f"{len(results) - len(bad)}/{len(results)} captures clean; {same}/{len(results)} with "
                  f"identical machine code on every architecture; summary: {summary}")
    raise typer.Exit(1 if bad else 0)


app.command("irdiff", help="Structurally diff reference Tile IR A against generated Tile IR B "
            "(exit 0 PASS, 2 PASS_WITH_NOTES, 1 FAIL).")(irdiff_command)


@app.command("gpu-check")
def gpu_check(
    ops: Annotated[Optional[list[str]], typer.Argument(help="Operators (default: all).")] = None,
    jobs: Annotated[int, typer.Option("-j", help="Operators checked in parallel processes.")] = 4,
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("out/gpu-check"),
) -> None:
    """GPU correctness of every op x backend x dtype x shape against PyTorch."""
    from tileport.gpu.check import run_parallel
    from tileport.ops import op_names
    names = ops or op_names()
    with console.status(f"checking {len(names)} operators ({jobs} processes)"):
        records = run_parallel(names, jobs, out)
    failed = [r for r in records if not r["ok"]]
    path = out / "check.json"
    path.write_text(json.dumps(records, indent=1))
    table = Table(title="GPU correctness")
    for col in ("op", "backend", "cases", "failed", "worst err/tol"):
        table.add_column(col)
    groups: dict = {}
    for r in records:
        groups.setdefault((r["op"], r["backend"]), []).append(r)
    for (op, be), rs in sorted(groups.items()):
        bad = [r for r in rs if not r["ok"]]
        worst = max((r.get("err_over_tol") or 0) for r in rs)
        table.add_row(op, be, str(len(rs)), f"[red]{len(bad)}[/]" if bad else "0", f"{worst:.2f}")
    console.print(table)
    for r in failed[:20]:
        console.print(f"[red]FAIL[/] {r['op']} {r['backend']} {r['dtype']} {r['shape']}: {escape(str(r.get('error')))}")
    console.print(f"{len(records) - len(failed)}/{len(records)} cases passed; records: {path}")
    raise typer.Exit(1 if failed else 0)


@app.command()
def bench(
    ops: Annotated[Optional[list[str]], typer.Argument(help="Operators (default: all).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("out/bench.json"),
    budget: Annotated[float, typer.Option(help="Seconds of repetitions per case and backend.")] = 0.3,
) -> None:
    """Parity benchmark on the GPU: cutile-rs vs cuTile Python vs torch (JSON; see `tileport report`)."""
    from tileport.gpu.bench import run
    from tileport.ops import op_names
    out.parent.mkdir(parents=True, exist_ok=True)
    with console.status("benchmarking"):
        result = run(ops or op_names(), out, budget_s=budget)
    s = result["summary"]
    console.print(f"overall geomean t(cutile-rs)/t(cuTile Python): {s['overall_geomean_ratio']}")
    console.print(f"results: {out}")


@app.command()
def report(
    results: Annotated[Path, typer.Argument(help="bench JSON from `tileport bench`.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output directory.")] = None,
) -> None:
    """Markdown + HTML report (with charts) from benchmark results."""
    from tileport.report import write_bench_report
    paths = write_bench_report(results, out or results.parent)
    for p in paths:
        console.print(f"wrote {p}")


def port(
    target: Annotated[Optional[list[str]], typer.Argument(help="FILE.py or FILE.py::kernel (several allowed).")] = None,
    op: Annotated[Optional[str], typer.Option("--op", help="A library operator: port its kernels.")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", help="Port every kernel of every .py file in DIR "
                                                   "(the reference corpus: src/tileport/ops/kernels).")] = None,
    jobs: Annotated[int, typer.Option("-j", "--jobs", help="Kernels in parallel.")] = 1,
    out: Annotated[Path, typer.Option("--out", "-o", help="Artifacts, verdicts and reports.")] = Path("out/port"),
    agent_cmd: Annotated[Optional[str], typer.Option("--agent-cmd", help="External agent for the repair stages "
                                                     "B(2)/D(2): run as `CMD <prompt.md>` (docs/pipeline.md).")] = None,
    agent_timeout: Annotated[float, typer.Option(help="Seconds before the agent is killed.")] = 900.0,
    gpu_results: Annotated[Optional[list[Path]], typer.Option("--gpu-results", help="GPU evidence recorded on a GPU "
                                                              "machine (files or directories) for D and E.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip stages whose inputs did not change.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help="Configurations (dtypes, constants) of "
                                                   "kernels outside the library: JSON, TOML or YAML.")] = None,
    residual: Annotated[bool, typer.Option("--residual", help="Run F (residual performance) after an "
                                           "unresolved E INVESTIGATE.")] = False,
    until: Annotated[Optional[str], typer.Option("--until", help="Stop after this stage (A-F); resume later.")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Never run D/E natively, even with a GPU.")] = False,
    profile: Annotated[str, typer.Option(help="Cargo profile of the libraries built for IR capture.")] = "dev",
) -> None:
    """Port kernels through the bounded pipeline A-F with verdicts, routing, caps and reports.

    Exit code 0 when every kernel reached the best terminal state attainable here (DONE, or
    BLOCKED(env) at D/E with only GPU evidence missing), 1 otherwise, 2 for usage errors."""
    from tileport.pipeline import Options, TargetError, resolve_targets
    from tileport.pipeline.batch import run_batch, summary_table
    from tileport.pipeline.verdicts import Stage
    from rich.markup import escape as esc
    try:
        targets = resolve_targets(target, op, corpus, config)
        stop = Stage(until.upper()) if until else None
    except (TargetError, ValueError) as e:
        console.print(f"[red]{esc(str(e))}[/]")
        raise typer.Exit(2) from None
    options = Options(out=out, jobs=jobs, resume=resume, agent_cmd=agent_cmd, agent_timeout=agent_timeout,
                      gpu_results=list(gpu_results or []), residual=residual, profile=profile,
                      native_gpu=False if no_gpu else None, until=stop)
    t0 = time.perf_counter()
    outcomes, session = run_batch(targets, options, console)
    console.print(summary_table(outcomes, out))
    gpu_ok, gpu_why = session.gpu()
    if not gpu_ok:
        console.print(f"[yellow]GPU stages D/E: {esc(gpu_why)}.[/] They end BLOCKED(env) unless --gpu-results "
                      "holds fresh evidence (docs/pipeline.md, 'GPU evidence').")
    for err in session.evidence.errors:
        console.print(f"[yellow]--gpu-results: {esc(err)}[/]")
    best = sum(1 for o in outcomes if o.ok)
    console.print(f"{best}/{len(outcomes)} kernel(s) reached the best state attainable here in "
                  f"{time.perf_counter() - t0:.1f} s; report: {out / 'report.html'}")
    raise typer.Exit(0 if best == len(outcomes) else 1)


app.command("port")(port)


if __name__ == "__main__":
    app()
