"""The `tileport` command."""

from __future__ import annotations

import functools
import json
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tileport import toolchain
from tileport.launches.bounds import DEFAULT_LAUNCHES, DEFAULT_SPECIALIZATIONS
from tileport.proc import ToolTimeout, stop_tools_on_signals
from tileport.tileir.cli import irdiff_command  # typer needs its signature now (imports the Tile IR toolkit)

# rich_markup_mode=None: plain help (the rich one shows a type for every flag: `--help <bool>`).
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Port cuTile Python kernels to cuTile Rust, and prove each port.")
console = Console()


class Profile(str, Enum):
    """Cargo profiles of the generated crate (runtime.library.PROFILES)."""

    release = "release"
    dev = "dev"


def fail(message: str, code: int = 2) -> NoReturn:
    """A usage or input error: one red line, no traceback."""
    console.print(f"[red]{escape(message)}[/]", soft_wrap=True)  # one line, whatever the width
    raise typer.Exit(code)


def diagnosed(command):
    """`command` with file-system errors (a path that is a file, unwritable, missing) reported as a
    diagnostic with exit code 2 instead of a traceback, and an external tool stopped at its time limit
    with exit code 1."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except OSError as e:
            where = f"{e.filename}: " if e.filename else ""
            fail(f"{where}{e.strerror or e}")
        except ToolTimeout as e:
            fail(str(e), 1)
    return run


def command(name: str | None = None, **kwargs):
    """app.command, with `diagnosed` errors."""
    return lambda fn: app.command(name, **kwargs)(diagnosed(fn))


def output_dir(path: Path, option: str = "--out") -> Path:
    """`path` as an output directory: usage error when it names a file."""
    if path.exists() and not path.is_dir():
        fail(f"{option} {path}: is a file; give a directory")
    return path


def build_progress(what: str):
    """Off a terminal (CI, logs) a spinner shows nothing: print a line every few tens of seconds."""
    if console.is_terminal:
        return None
    return lambda seconds: console.print(f"still {what}... {seconds:.0f} s")


@app.callback()
def main() -> None:
    """tileport: deterministic cuTile Python -> cuTile Rust porting with Tile IR proofs."""
    stop_tools_on_signals()  # tools run by worker threads too: a signal must reach them (tileport.proc)


@command()
def doctor() -> None:
    """Check every toolchain component; exit 1 if a required one is missing."""
    from tileport.doctor import check_all
    table = Table(title="tileport doctor")
    for col in ("", "component", "version"):
        table.add_column(col)
    table.add_column("path / how to fix", no_wrap=True, overflow="ignore")  # full paths, never cut
    missing = 0
    for c in check_all():
        if c.ok:
            mark, detail = "[green]ok[/]", c.path
        elif c.required:
            mark, detail, missing = "[red]MISSING[/]", f"[red]{c.fix}[/]", missing + 1
        else:
            mark, detail = "[yellow]optional[/]", f"[yellow]{c.fix}[/]"
        table.add_row(mark, c.name, c.version or "-", detail)
    print_wide(table)
    if missing:
        console.print(f"[red]{missing} required component(s) missing.[/] One command installs all: "
                      f"[bold]{toolchain.SETUP_COMMAND}[/]")
        raise typer.Exit(1)
    console.print("[green]toolchain complete[/]")


def print_wide(table: Table) -> None:
    """Print `table`; off a terminal (a log, a pipe: 80 columns) at its natural width, so paths and
    routes are never folded or cut."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement
    wide = Console(width=100_000)
    Console(width=max(console.width, Measurement.get(wide, wide.options, table).maximum)).print(table)


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


@command()
def translate(
    files: Annotated[Optional[list[Path]], typer.Argument(
        help="cuTile Python / Triton files to translate; or ONE package: a folder, a wheel, an sdist or a pip "
             "requirement (name==version), translated whole (package mode, docs/packages.md).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output crate directory.")] = Path("out/crate"),
    corpus: Annotated[bool, typer.Option(help="Translate the reference corpus into rust/.")] = False,
    crate: Annotated[str, typer.Option(help="Name of the generated crate.")] = "tileport_kernels",
    check: Annotated[bool, typer.Option(help="With --corpus: fail if rust/ differs from a fresh translation.")] = False,
    force: Annotated[bool, typer.Option(help="Write into a non-empty directory that holds no crate tileport "
                                        "generated (only the crate's files are written).")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help="Configurations (dtypes, constant values) "
                                                   "per kernel: JSON, TOML or YAML (README, 'Configurations').")] = None,
    jobs: Annotated[Optional[int], typer.Option("-j", "--jobs", min=1, help="Package mode: files lowered in "
                                                "parallel processes (default: one per CPU, at most 8).")] = None,
    faithful: Annotated[bool, typer.Option("--faithful", help="Write one Tile IR operation per line, every view and "
                                           "memory mode spelled (default: idiomatic Rust, same Tile IR).")] = False,
) -> None:
    """Translate cuTile Python and Triton kernels to a cutile-rs crate (device code, C-ABI launchers, manifest).

    Only the files tileport generated before (listed by the crate's kernels.json) are replaced. Given one
    package (folder, wheel, sdist, pip requirement): OUT/crate, OUT/library.json and OUT/library.html."""
    from tileport.emit.rust.crate import OutputDirError, check_output_dir, crate_name_error
    from tileport.translate import translate as run
    t0 = time.perf_counter()
    if error := crate_name_error(crate):
        fail(error)
    if not corpus and files and len(files) == 1 and _package_input(files[0]):
        if config:
            fail("--config applies to files, not to a package")
        raise typer.Exit(_translate_package(str(files[0]), output_dir(out, "-o"), crate, jobs, force, faithful))
    if corpus:
        from tileport.corpus import REPO, translate_corpus
        if check:
            raise typer.Exit(_check_drift(REPO / "rust", faithful))
        out = REPO / "rust" if out == Path("out/crate") else out
    elif not files:
        fail("give cuTile Python files, or --corpus")
    elif missing := [f for f in files if not f.exists()]:
        fail(f"no such file: {', '.join(map(str, missing))}")
    elif odd := [f for f in files if not f.is_file()]:
        fail(f"not a file (a folder, a device or a pipe): {', '.join(map(str, odd))}")
    try:
        check_output_dir(out, force)
        configs = _load_configs(config) if config else {}
        report = translate_corpus(out, faithful) if corpus else run(
            [str(f) for f in files], out, {str(f): configs for f in files}, crate=crate, force=force, faithful=faithful)
    except OutputDirError as e:
        fail(f"-o {e}")
    _print_translation(report)
    n_ok = sum(r.ok for r in report.results)
    where = report.written[0].parent if report.written else out
    console.print(f"{n_ok}/{len(report.results)} kernels translated in {time.perf_counter() - t0:.2f} s"
                  + (f"; crate written to {where}" if report.written else ""))
    raise typer.Exit(0 if report.ok else 1)


def _package_input(path: Path) -> bool:
    from tileport.packages import is_package_input
    return is_package_input(str(path))


def _translate_package(arg: str, out: Path, crate: str, jobs: int | None, force: bool, faithful: bool) -> int:
    """Package mode of `translate` (tileport.packages): exit 0 when every kernel found translated."""
    from tileport.emit.rust.crate import OutputDirError
    from tileport.packages import FetchError, StderrProgress, translate as run_package
    try:
        lib, _report, (json_path, html_path) = run_package(arg, out, crate, jobs, force, StderrProgress(), faithful)
    except FetchError as e:
        fail(str(e))
    except OutputDirError as e:
        fail(f"-o {e}")
    ok = sum(r.translated for r in lib.rows)
    for note in lib.skipped[:5]:
        console.print(f"[yellow]skipped[/] {escape(note['file'])}: {escape(note['why'])}", highlight=False,
                      soft_wrap=True)
    if len(lib.skipped) > 5:
        console.print(f"[yellow]skipped[/] {len(lib.skipped) - 5} more files of other vendors' back ends "
                      f"(listed in {escape(str(json_path))})", soft_wrap=True)
    console.print(escape(f"{ok}/{len(lib.rows)} kernels of {arg} translated in {lib.seconds:.1f} s"
                         + (f"; crate written to {lib.crate}" if lib.crate else "") + f"; report: {html_path}"),
                  highlight=False, soft_wrap=True)
    return _package_exit(lib, arg, ok)


def _package_exit(lib, arg: str, best: int) -> int:
    """0 when the package has kernels and every one of them is at `best`, else 1 (saying so when none)."""
    if not lib.rows:
        console.print(escape(f"no @triton.jit or @ct.kernel kernel found in {arg} ({lib.modules} modules, "
                             f"{lib.scanned} naming triton or cuda.tile)"), style="red", soft_wrap=True)
    return 0 if lib.rows and best == len(lib.rows) and not lib.problems else 1


def _load_configs(path: Path) -> dict:
    from tileport.config import ConfigError, kernel_configs, load_config
    try:
        return kernel_configs(load_config(path))
    except ConfigError as e:
        fail(f"--config {e}")


def _check_drift(crate_dir: Path, faithful: bool = False) -> int:
    from tileport.corpus import translate_corpus
    from tileport.emit.rust.crate import format_crate
    report = translate_corpus(None, faithful)
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


@command()
def build(
    crate: Annotated[Path, typer.Option(help="Crate directory.")] = Path("rust"),
    profile: Annotated[Profile, typer.Option(help="Cargo profile.")] = Profile.release,
) -> None:
    """Build the generated cdylib with cargo (incremental)."""
    from tileport.runtime.library import BuildError
    from tileport.runtime.library import build as do_build
    if not (crate / "Cargo.toml").is_file():
        fail(f"--crate {crate}: no Cargo.toml (a crate written by `tileport translate`)")
    try:
        with console.status(f"cargo build ({profile.value})"):
            so = do_build(crate, profile.value, build_progress(f"building {crate} ({profile.value})"))
    except BuildError as e:
        fail(str(e), 1)
    console.print(f"built {so} ({so.stat().st_size / 1e6:.1f} MB)")


@command()
def verify(
    out: Annotated[Path, typer.Option("--out", "-o", help="Artifacts directory.")] = Path("out/verify"),
    kernel: Annotated[Optional[list[str]], typer.Option(help="Only these kernels of the corpus.")] = None,
    jobs: Annotated[int, typer.Option("-j", min=1, help="Captures in parallel.")] = 2,
    profile: Annotated[Profile, typer.Option(help="Cargo profile of the library.")] = Profile.release,
    fresh: Annotated[bool, typer.Option("--fresh", help="Compile every cubin again instead of taking it from "
                                        "the capture cache ($TILEPORT_CACHE_DIR) that `tileport port` shares.")]
    = False,
) -> None:
    """CPU proof of the reference corpus's ports: IR both sides, cubins (sm_80/90/100), structural IR diff."""
    from tileport.cache import DiskCache, default_root
    from tileport.corpus import REPO, captures_by_kernel
    from tileport.ops.specs import all_specs
    from tileport.runtime.library import load
    from tileport.capture.verify import verify_all, write_summary
    output_dir(out)
    by_kernel = captures_by_kernel(all_specs())
    unknown = sorted(set(kernel or []) - set(by_kernel))
    if unknown:
        fail(f"--kernel: no corpus kernel {', '.join(unknown)} (kernels: {', '.join(sorted(by_kernel))})")
    with console.status("building the generated crate"):
        lib = load(REPO / "rust", profile=profile.value, progress=build_progress("building the generated crate"))
    items = [(path, c) for k, (path, caps) in by_kernel.items() if not kernel or k in kernel for c in caps]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("verifying captures", total=len(items))
        results = verify_all(lib, items, out, jobs, lambda r: progress.advance(task),
                             cache=None if fresh else DiskCache(default_root()))
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


@functools.wraps(irdiff_command)
def _irdiff(*args, **kwargs) -> None:
    target = kwargs.get("target", "sm_90")
    if target not in toolchain.TILE_TARGETS:
        fail(f"--target {target}: not a GPU target of tileiras {toolchain.TILEIRAS_RELEASE} "
             f"({', '.join(toolchain.TILE_TARGETS)})")
    irdiff_command(*args, **kwargs)


command("irdiff", help="Structurally diff reference Tile IR A against generated Tile IR B "
        "(exit 0 PASS, 2 PASS_WITH_NOTES, 1 FAIL).")(_irdiff)


@command("gpu-check")
def gpu_check(
    ops: Annotated[Optional[list[str]], typer.Argument(help="Operators (default: all).")] = None,
    jobs: Annotated[int, typer.Option("-j", min=1, help="Operators checked in parallel processes.")] = 4,
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("out/gpu-check"),
) -> None:
    """GPU correctness of every op x backend x dtype x shape against PyTorch."""
    from tileport.atomic import write_text_atomic
    from tileport.gpu.check import run_parallel
    from tileport.ops import op_names
    output_dir(out)
    unknown = sorted(set(ops or []) - set(op_names()))
    if unknown:
        fail(f"no operator {', '.join(unknown)} (operators: {', '.join(op_names())})")
    names = ops or op_names()
    with console.status(f"checking {len(names)} operators ({jobs} processes)"):
        records = run_parallel(names, jobs, out)
    failed = [r for r in records if not r["ok"]]
    path = write_text_atomic(out / "check.json", json.dumps(records, indent=1))
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


@command()
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


@command()
def report(
    results: Annotated[Path, typer.Argument(help="bench JSON from `tileport bench`.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output directory.")] = None,
) -> None:
    """Markdown + HTML report (with charts) from benchmark results."""
    from tileport.report import ReportError, write_bench_report
    try:
        paths = write_bench_report(results, output_dir(out or results.parent))
    except ReportError as e:
        fail(str(e))
    for p in paths:
        console.print(f"wrote {p}")


def port(
    target: Annotated[Optional[list[str]], typer.Argument(
        help="FILE.py or FILE.py::kernel (several allowed); or ONE package: a folder, a wheel, an sdist or a pip "
             "requirement (name==version), ported whole (package mode, docs/packages.md).")] = None,
    op: Annotated[Optional[str], typer.Option("--op", help="A library operator: port its kernels.")] = None,
    corpus: Annotated[Optional[Path], typer.Option("--corpus", help="Port every kernel of every .py file in DIR "
                                                   "(the reference corpus: src/tileport/ops/kernels).")] = None,
    jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="Kernels in parallel.")] = 1,
    executor: Annotated[str, typer.Option("--executor", help="Where the stages run: local (-j threads), ray (a "
                                          "local Ray cluster, or the one $RAY_ADDRESS names) or ray=ADDRESS "
                                          "(pip install 'tileport[ray]'; docs/scaling.md).")] = "local",
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
    profile: Annotated[Profile, typer.Option(help="Cargo profile of the libraries built for IR capture.")] = Profile.dev,
    launches: Annotated[Optional[Path], typer.Option("--launches", help="Launch spec (from `tileport record`) of "
                                                     "kernels outside the library: configurations, D and E.")] = None,
    force: Annotated[bool, typer.Option(help="Write into a non-empty --out that holds no port run (files tileport "
                                        "did not write are never replaced or deleted).")] = False,
    faithful: Annotated[bool, typer.Option("--faithful", help="Port to Rust written one Tile IR operation per line "
                                           "(default: idiomatic Rust, same Tile IR).")] = False,
) -> None:
    """Port kernels through the bounded pipeline A-F with verdicts, routing, caps and reports.

    Exit code 0 when every kernel reached the best terminal state attainable here (DONE, or
    BLOCKED(env) at D/E with only GPU evidence missing), 1 otherwise, 2 for usage errors."""
    from tileport.executor import ExecutorError
    from tileport.pipeline import Options, TargetError, resolve_targets
    from tileport.pipeline.artifacts import UnsafePathError
    from tileport.pipeline.batch import run_batch, summary_table
    from tileport.pipeline.outdir import OutDirError, OutLockedError
    from tileport.pipeline.verdicts import Stage
    from rich.markup import escape as esc
    output_dir(out)
    package = bool(target) and len(target) == 1 and not op and corpus is None and _package_input(Path(target[0]))
    if package and config:
        fail("--config applies to files, not to a package (give its launches with --launches)")
    try:
        targets = [] if package else resolve_targets(target, op, corpus, config, launches)
        stop = Stage(until.upper()) if until else None
        options = Options(out=out, jobs=jobs, resume=resume, agent_cmd=agent_cmd, agent_timeout=agent_timeout,
                          gpu_results=list(gpu_results or []), residual=residual, profile=profile.value,
                          native_gpu=False if no_gpu else None, until=stop, force=force, executor=executor,
                          faithful=faithful)
    except (TargetError, ValueError) as e:
        fail(str(e))
    if package:
        raise typer.Exit(_port_package(target[0], options, launches))
    t0 = time.perf_counter()
    try:
        outcomes, session = run_batch(targets, options, console)
    except (OutLockedError, OutDirError, UnsafePathError, ExecutorError) as e:
        fail(str(e))
    print_wide(summary_table(outcomes, out))
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


command("port")(port)


def _port_package(arg: str, options, launches: Optional[Path]) -> int:
    """Package mode of `port` (tileport.packages): exit 0 when every kernel found translated and reached
    the best state attainable here."""
    from tileport.executor import ExecutorError
    from tileport.packages import FetchError, StderrProgress, port_input as run_package
    from tileport.pipeline import TargetError
    from tileport.pipeline.artifacts import UnsafePathError
    from tileport.pipeline.batch import summary_table
    from tileport.pipeline.outdir import OutDirError, OutLockedError
    try:
        lib, ported, session, (_json_path, html_path) = run_package(arg, options, launches, console, StderrProgress())
    except FetchError as e:
        fail(str(e))
    except (OutLockedError, OutDirError, UnsafePathError, TargetError, ExecutorError) as e:
        fail(str(e))
    if ported:
        print_wide(summary_table(ported, options.out))
    best = sum(1 for o in ported if o.ok)
    translated = sum(r.translated for r in lib.rows)
    console.print(escape(f"{len(lib.rows)} kernels found in {arg}, {translated} translated, {best} reached the best "
                         f"state attainable here; {len(lib.skipped)} files of other vendors' back ends skipped; "
                         f"{lib.seconds:.1f} s; report: {html_path}"), highlight=False, soft_wrap=True)
    return _package_exit(lib, arg, best)


@command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def record(
    command: Annotated[list[str], typer.Argument(help="The program to run, after `--` (e.g. -- python3 app.py).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Launch spec to write (JSON).")] = Path("launches.json"),
    append: Annotated[bool, typer.Option("--append", help="Add to an existing spec instead of replacing it.")] = False,
    max_specializations: Annotated[int, typer.Option(
        "--max-specializations", min=1, help="Distinct specializations kept per kernel (dtypes, ranks, constants, "
        "divisibility, launch options); launches of others are counted, not kept.")] = DEFAULT_SPECIALIZATIONS,
    max_launches: Annotated[int, typer.Option(
        "--max-launches", min=1, help="Distinct launches (grids, extents) kept per specialization; others are "
        "counted, not kept.")] = DEFAULT_LAUNCHES,
) -> None:
    """Run YOUR program or test suite (on a GPU machine) and record every kernel launch into a launch spec
    for `tileport port --launches` (docs/pipeline.md, 'Launch specs'). Exits with the program's code."""
    from tileport.launches import LaunchSpecError
    from tileport.launches.bounds import Caps
    from tileport.launches.record import run as run_recorded
    from tileport.launches.spec import load_document
    try:
        rc, records = run_recorded(list(command), out, append, Caps(max_specializations, max_launches))
        dropped = load_document(out)[1] if records else []
    except LaunchSpecError as e:
        console.print(f"[red]{escape(str(e))}[/]")
        raise typer.Exit(1) from None
    for r in records:
        console.print(f"  {escape(r.label)}  x{r.count}", highlight=False)
    specs = len({r.specialization() for r in records})
    console.print(f"{len(records)} distinct launch(es), {specs} specialization(s) of "
                  f"{len({r.kernel_id() for r in records})} kernel(s) in {out}")
    for d in dropped:
        console.print(escape(f"  not kept over the caps: {d.kernel}: {d.launches} launch(es) of "
                             f"{len(d.specializations)} more specialization(s) (--max-specializations "
                             f"{max_specializations}), {d.extra_launches} launch(es) of kept specializations with "
                             f"other grids or extents (--max-launches {max_launches})"), highlight=False)
    if not records:
        console.print("[red]no launch was recorded[/]: the command launched no cuTile or Triton kernel from a "
                      f"Python process it started (its exit code: {rc})")
        raise typer.Exit(rc or 1)
    files = " ".join(sorted({r.file for r in records}))
    console.print(f"next: tileport port {escape(files)} --launches {escape(str(out))}", highlight=False)
    raise typer.Exit(rc)


if __name__ == "__main__":
    app()
