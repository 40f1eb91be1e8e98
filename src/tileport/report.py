"""Benchmark reports: markdown and HTML (with matplotlib bar charts) from `tileport bench` JSON.

    tileport report out/bench.json -o out/          # -> bench.md, bench.html, bench.png, bench-ops.png

The report has: the environment and the ceilings measured in the same run (device copy bandwidth,
cuBLAS bf16 GEMM rate); parity per op (geomean and worst t(cutile-rs)/t(cuTile Python)); the roofline
of every op at its largest benchmark size (% of copy bandwidth for memory-bound ops, % of cuBLAS bf16
and of the bf16 datasheet peak for GEMMs); every case with its spread; the host launch overhead; and
the investigations of every op above 1.02.

Investigations live next to the results, in `<stem>.investigations.json` (written by people, read
here; see INVESTIGATIONS_SCHEMA and docs/ops.md):

    {"softmax": {"status": "open",
                 "cases": ["float16 8192x1000"],
                 "cause": "...", "evidence": ["...", "..."], "fix": "..."}}

Nothing here imports torch; matplotlib is needed only for the charts.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

from tileport.atomic import write_text_atomic
from tileport.gpu.bench import PARITY_BAR, summarize
from tileport.ops.specs._common import FLOAT_DTYPES

COPY_BW_BAR = 85.0  # % of measured copy bandwidth memory-bound ops should reach at large sizes
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}

INVESTIGATIONS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "tileport benchmark investigations: op -> cause, evidence, fix",
    "type": "object",
    "propertyNames": {"pattern": "^[a-z_][a-z0-9_]*$"},
    "additionalProperties": {
        "type": "object",
        "required": ["cause", "evidence", "fix"],
        "additionalProperties": False,
        "properties": {
            "status": {"enum": ["open", "fixed", "explained"]},
            "cases": {"type": "array", "items": {"type": "string"}},
            "cause": {"type": "string", "minLength": 1},
            "evidence": {"oneOf": [{"type": "string", "minLength": 1},
                                   {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}]},
            "fix": {"type": "string", "minLength": 1},
        },
    },
}


class ReportError(ValueError):
    """The results or the investigations file cannot be reported (with the reason)."""


# ---------------------------------------------------------------------------------------------
# Data


# What the torch column timed: results with "columns" (since the baselines) vs older ones.
TORCH_BASELINE = ("torch µs is the op's PyTorch baseline in the input dtype, eager (tileport.ops.baselines; f32 "
                  "GEMMs with TF32); the JSON also has torch.compile and call-level times. GEMMs also run on "
                  "torch.rand inputs (rows marked rand).")
TORCH_REFERENCE = ("torch µs is the spec's PyTorch reference (GEMMs: an f32 matmul of upcast inputs, no TF32), "
                   "shown for scale.")


def _fmt(v, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _shape(r: dict) -> str:
    return "x".join(map(str, r["shape"])) + (" (rand)" if r.get("inputs") == "rand" else "")


def _op_order(records: list[dict]) -> list[str]:
    seen: list[str] = []
    for r in records:
        if r["op"] not in seen:
            seen.append(r["op"])
    return seen


def _spread(timing: dict | None) -> float | None:
    """(p90 - p10) / median, in %."""
    if not timing or not timing.get("median_us"):
        return None
    return 100 * (timing["p90_us"] - timing["p10_us"]) / timing["median_us"]


def _largest(records: list[dict]) -> list[dict]:
    """Records of the op's largest benchmark shape (by element count), one per dtype."""
    if not records:
        return []
    size = max(math.prod(r["shape"]) for r in records)
    shape = next(r["shape"] for r in records if math.prod(r["shape"]) == size)  # ties: the first benchmarked
    rows = [r for r in records if r["shape"] == shape]
    return sorted(rows, key=lambda r: FLOAT_DTYPES.index(r["dtype"]) if r["dtype"] in FLOAT_DTYPES else 99)


def load_investigations(path: Path) -> dict:
    """The investigations file (validated), or {} when there is none."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON: {e}") from None
    import jsonschema
    validator = jsonschema.Draft202012Validator(INVESTIGATIONS_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    if errors:
        msgs = "; ".join(f"{'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors[:5])
        raise ReportError(f"{path}: invalid investigations file: {msgs}")
    return data


def investigations_path(results_json: Path) -> Path:
    results_json = Path(results_json)
    return results_json.with_name(f"{results_json.stem}.investigations.json")


def investigation_skeleton(result: dict) -> dict:
    """A starting investigations file: every op above the bar with its cases over 1.02."""
    summ = summarize(result["records"])
    out = {}
    for op in summ["ops_over_1_02"]:
        cases = [f"{r['dtype']} {_shape(r)} ({r['ratio_rs_over_cutile']:.3f})" for r in result["records"]
                 if r["op"] == op and (r.get("ratio_rs_over_cutile") or 0) > PARITY_BAR]
        out[op] = {"status": "open", "cases": cases, "cause": "TODO", "evidence": ["TODO"], "fix": "TODO"}
    return out


# ---------------------------------------------------------------------------------------------
# Document model: one list of blocks, rendered to markdown and to HTML


def _blocks(result: dict, investigations: dict, charts: dict[str, str],
            inv_file: str = "<results>.investigations.json") -> list[tuple]:
    env, ceil = result["environment"], result["ceilings"]
    records = result["records"]
    summ = summarize(records)
    order = _op_order(records)
    by_op = {op: [r for r in records if r["op"] == op] for op in order}
    B: list[tuple] = [("h", 1, "tileport parity benchmark")]

    env_items = [f"GPU: {env.get('gpu')} ({env.get('nvidia_smi')}); torch {env.get('torch')}, "
                 f"cuda-tile {env.get('cuda_tile')}, tileiras {env.get('tileiras')}"]
    runs = result.get("runs") or {}
    if runs:
        for name, run in runs.items():
            e, c = run.get("environment", {}), run.get("ceilings", {})
            env_items.append(f"{name}: commit `{str(e.get('commit', ''))[:10]}`, {e.get('date')}, "
                             f"`{_command(e.get('command', ''))}`: device copy "
                             f"{_fmt(c.get('copy_gbps'), '.0f')} GB/s, "
                             f"cuBLAS bf16 {_fmt(c.get('cublas_bf16_tflops'), '.0f')}"
                             f" TFLOP/s{' (partial run)' if run.get('partial') else ''}")
    else:
        env_items.append(f"commit `{env.get('commit')}`, {env.get('date')}; command: `{env.get('command')}`")
        env_items.append(f"measured ceilings: device copy {ceil['copy_gbps']:.0f} GB/s (1 GiB read + 1 GiB write); "
                         f"cuBLAS bf16 8192^3 {ceil['cublas_bf16_tflops']:.0f} TFLOP/s "
                         f"(datasheet {ceil['bf16_datasheet_tflops']:.0f})")
    env_items.append("times: median GPU kernel time from profiler events (CUPTI), L2 flushed before each "
                     "repetition, repetitions set by a time budget; ratios are t(cutile-rs) / t(cuTile Python), "
                     "lower is better")
    B.append(("ul", env_items))
    if result.get("note"):
        B.append(("p", result["note"]))

    overall = summ["overall_geomean_ratio"]
    over = summ["ops_over_1_02"]
    B.append(("p", f"**Overall geomean t(cutile-rs)/t(cuTile Python): {_fmt(overall)}** over "
                   f"{sum(s['cases'] for s in summ['per_op'].values())} cases of {len(summ['per_op'])} ops; "
                   f"ops with a per-op geomean above {PARITY_BAR}: "
                   f"{', '.join(summ['ops_geomean_over_1_02']) or 'none'}; ops with a case above {PARITY_BAR}: "
                   f"{', '.join(over) or 'none'}."))
    if "ops" in charts:
        B.append(("img", charts["ops"], "per-op parity and roofline"))

    # Parity per op
    B.append(("h", 2, "Parity per op"))
    rows = []
    for op in order:
        s = summ["per_op"].get(op)
        if not s:
            rows.append([op, "-", "-", "0", "no ratio (see Errors)", ""])
            continue
        flag = ("geomean" if s["geomean_ratio"] > PARITY_BAR else "worst case") if s["max_ratio"] > PARITY_BAR else "-"
        inv = investigations.get(op)
        note = (f"{inv.get('status', 'open')}: {_first_sentence(inv['cause'])}" if inv
                else ("**no investigation recorded**" if flag != "-" else ""))
        rows.append([op, _fmt(s["geomean_ratio"]), _fmt(s["max_ratio"]), str(s["cases"]), flag, note])
    B.append(("table", ["op", "geomean rs/cuTile", "worst rs/cuTile", "cases", f"above {PARITY_BAR}",
                        "investigation"], rows))

    # Roofline at the largest size
    mem_ops = [op for op in order if by_op[op][0]["kind"] != "compute"]
    gemm_ops = [op for op in order if by_op[op][0]["kind"] == "compute"]
    if mem_ops:
        B.append(("h", 2, "Memory-bound ops at their largest benchmark size"))
        B.append(("p", f"Achieved bandwidth as % of the device copy bandwidth measured in the same run "
                       f"(f32 / f16 / bf16). Bar: ≥ {COPY_BW_BAR:.0f} % for cutile-rs. Last column: the time of a "
                       "copy of the case's bytes timed in the same rotation over cutile-rs's time, in % (a roofline "
                       "of the case's own size, in the kernels' conditions)."))
        rows = []
        for op in mem_ops:
            big = _largest(by_op[op])
            pct = {b: " / ".join(_fmt((r.get("pct_copy_bw") or {}).get(b), ".1f") for r in big)
                   for b in ("cutile-rs", "cutile", "torch")}
            gbps = " / ".join(_fmt((r.get("gbps") or {}).get("cutile-rs"), ".0f") for r in big)
            rs_vals = [(r.get("pct_copy_bw") or {}).get("cutile-rs") for r in big]
            worst = min((v for v in rs_vals if v is not None), default=None)
            meets = "-" if worst is None else ("yes" if worst >= COPY_BW_BAR else f"no (min {worst:.1f})")
            beside = " / ".join(_fmt((r.get("pct_copy_side_by_side") or {}).get("cutile-rs"), ".1f") for r in big)
            rows.append([op, _shape(big[0]), gbps, pct["cutile-rs"], pct["cutile"], pct["torch"], meets, beside])
        B.append(("table", ["op", "shape", "cutile-rs GB/s", "% copy BW cutile-rs", "% copy BW cuTile",
                            "% copy BW torch" + ("" if "columns" in result else " ref"),
                            f"≥ {COPY_BW_BAR:.0f} %", "% of a same-bytes copy beside it, cutile-rs"], rows))
    if gemm_ops:
        B.append(("h", 2, "GEMMs at their largest benchmark size"))
        B.append(("p", "Achieved TFLOP/s as % of the cuBLAS bf16 8192^3 rate measured in the same run and of the "
                       "bf16 dense datasheet peak. f32 runs on TF32 tensor cores (its % of a bf16 peak is for "
                       "reference only)."))
        rows = []
        for op in gemm_ops:
            for r in _largest(by_op[op]):
                tf = r.get("tflops") or {}
                cub = r.get("pct_cublas_bf16") or {}
                ds = r.get("pct_bf16_datasheet") or {}
                rows.append([op, r["dtype"], _shape(r),
                             _fmt(tf.get("cutile-rs"), ".0f"), _fmt(cub.get("cutile-rs"), ".1f"),
                             _fmt(ds.get("cutile-rs"), ".1f"),
                             _fmt(tf.get("cutile"), ".0f"), _fmt(cub.get("cutile"), ".1f"), _fmt(ds.get("cutile"), ".1f")])
        B.append(("table", ["op", "dtype", "shape", "cutile-rs TFLOP/s", "% cuBLAS bf16 (rs)", "% datasheet (rs)",
                            "cuTile TFLOP/s", "% cuBLAS bf16 (cuTile)", "% datasheet (cuTile)"], rows))

    # Host launch overhead
    lo_rows = []
    sources = [(name, run.get("launch_overhead_us")) for name, run in runs.items()] if runs else []
    if result.get("launch_overhead_us"):
        sources.insert(0, ("this run" if not runs else "merged", result["launch_overhead_us"]))
    for name, lo in sources:
        if not lo:
            continue
        plan_rs, plan_ct = lo.get("cutile-rs_plan_only"), lo.get("cutile_plan_only")
        lo_rows.append([name, _fmt(lo.get("torch_add"), ".1f"), _fmt(lo.get("cutile"), ".1f"),
                        _fmt(lo.get("cutile-rs"), ".1f"), _fmt(plan_ct, ".1f"), _fmt(plan_rs, ".1f"),
                        _fmt(plan_rs / plan_ct if plan_rs and plan_ct else None, ".2f")])
    if lo_rows:
        B.append(("h", 2, "Host launch overhead"))
        B.append(("p", "Host µs per call of a one-block vector_add (1024 f32), asynchronous, averaged over 2000 "
                       "calls: `torch.add` for scale; the full `tileport.ops` call (input checks, out= checks, launch "
                       "plan, launch) on each tile backend; and the launch of a ready plan alone: `ct.launch` for "
                       "cuTile Python vs the generated C ABI (ctypes + descriptors + cutile-rs launcher) for "
                       "cutile-rs."))
        B.append(("table", ["run", "torch.add", "API cuTile", "API cutile-rs", "plan-only ct.launch",
                            "plan-only C ABI", "C ABI / ct.launch"], lo_rows))

    # Every case
    B.append(("h", 2, "Every case"))
    if "cases" in charts:
        B.append(("img", charts["cases"], "parity per case"))
    B.append(("p", (TORCH_BASELINE if "columns" in result else TORCH_REFERENCE)
              + " Rate and % roof are for cutile-rs / cuTile: % of copy bandwidth for "
                "memory-bound ops, % of cuBLAS bf16 for GEMMs. Spread: (p90 - p10) / median of the repetitions."))
    rows = []
    for r in records + result.get("rand_input_records", []):
        t = r["times_us"]
        compute = r["kind"] == "compute"
        rate = r.get("tflops") if compute else r.get("gbps")
        roof = r.get("pct_cublas_bf16") if compute else r.get("pct_copy_bw")
        unit = "TFLOP/s" if compute else "GB/s"
        tm = r.get("timings", {})
        rows.append([r["op"], r["dtype"], _shape(r), _fmt(t.get("torch"), ".1f"), _fmt(t.get("cutile"), ".1f"),
                     _fmt(t.get("cutile-rs"), ".1f"), _fmt(r.get("ratio_rs_over_cutile")),
                     f"{_fmt((rate or {}).get('cutile-rs'), '.0f')} / {_fmt((rate or {}).get('cutile'), '.0f')} {unit}",
                     f"{_fmt((roof or {}).get('cutile-rs'), '.1f')} / {_fmt((roof or {}).get('cutile'), '.1f')}",
                     f"{_fmt(_spread(tm.get('cutile-rs')), '.1f')} / {_fmt(_spread(tm.get('cutile')), '.1f')}"])
    B.append(("table", ["op", "dtype", "shape", "torch µs", "cuTile µs", "cutile-rs µs", "rs/cuTile",
                        "rate rs / cuTile", "% roof rs / cuTile", "spread % rs / cuTile"], rows))

    # Investigations
    B.append(("h", 2, "Investigations"))
    inv_ops = [op for op in order if op in over or op in investigations]
    B.append(("p", f"Every op with a case above {PARITY_BAR}: cause, evidence and fix (or the fix made), from "
                   f"`{inv_file}` next to the results (format: docs/ops.md)."
              if inv_ops else f"No op has a case above {PARITY_BAR}."))
    for op in inv_ops:
        s = summ["per_op"].get(op, {})
        cases = [f"{r['dtype']} {_shape(r)}: {r['ratio_rs_over_cutile']:.3f}" for r in by_op[op]
                 if (r.get("ratio_rs_over_cutile") or 0) > PARITY_BAR]
        inv = investigations.get(op)
        B.append(("h", 3, op))
        head = (f"geomean {_fmt(s.get('geomean_ratio'))}, worst {_fmt(s.get('max_ratio'))}"
                + (f"; status: **{inv.get('status', 'open')}**" if inv else ""))
        B.append(("p", head + (f"; cases above {PARITY_BAR}: {'; '.join(cases)}" if cases else "")))
        if not inv:
            B.append(("p", f"**No investigation recorded.** Add `{op}` to `{inv_file}`."))
            continue
        if inv.get("cases"):
            B.append(("p", "Cases investigated: " + "; ".join(inv["cases"])))
        B.append(("p", f"**Cause.** {inv['cause']}"))
        ev = inv["evidence"] if isinstance(inv["evidence"], list) else [inv["evidence"]]
        B.append(("p", "**Evidence.**"))
        B.append(("ul", ev))
        B.append(("p", f"**Fix.** {inv['fix']}"))
    unknown = sorted(set(investigations) - set(order))
    if unknown:
        B.append(("p", f"Investigations of ops not in these results: {', '.join(unknown)}."))

    errors = [f"{r['op']} {r['dtype']} {_shape(r)} {b}: {e}" for r in records for b, e in r.get("errors", {}).items()]
    if errors:
        B.append(("h", 2, "Errors"))
        B.append(("ul", errors))
    B.append(("h", 2, "Reproduce"))
    B.append(("p", "On the GPU machine: `tileport bench --out bench.json` (all ops; `tileport bench OP... --budget S` "
                   "for some), then `tileport report bench.json -o DIR` anywhere with matplotlib. See docs/ops.md."))
    return B


def _command(command: str) -> str:
    """`tileport bench ...` for a recorded command line (the interpreter's path to cli.py dropped)."""
    m = re.search(r"(?:^|[/\s])(?:cli\.py|tileport)\s+(bench\b.*)$", command)
    return f"tileport {m.group(1)}" if m else command


def _first_sentence(text: str, limit: int = 90) -> str:
    first = re.split(r"(?<=[.;])\s", text.strip(), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[tuple]) -> str:
    out: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind == "h":
            out += ["#" * b[1] + " " + b[2], ""]
        elif kind == "p":
            out += [b[1], ""]
        elif kind == "ul":
            out += [f"- {item}" for item in b[1]] + [""]
        elif kind == "img":
            out += [f"![{b[2]}]({b[1]})", ""]
        elif kind == "table":
            headers, rows = b[1], b[2]
            out.append("| " + " | ".join(headers) + " |")
            out.append("|" + "---|" * len(headers))
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _inline_html(text: str) -> str:
    s = html.escape(str(text), quote=False)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)


_CSS = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}"
        "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#f3f3f3}"
        "td:nth-child(n+2){font-variant-numeric:tabular-nums}code{background:#f6f6f6;padding:0 3px}"
        "img{max-width:100%}h3{margin-top:1.5em}")


def to_html(blocks: list[tuple], title: str = "tileport benchmark") -> str:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        kind = b[0]
        if kind == "h":
            out.append(f"<h{b[1]} id='{re.sub(r'[^a-z0-9]+', '-', b[2].lower())}'>{_inline_html(b[2])}</h{b[1]}>")
        elif kind == "p":
            out.append(f"<p>{_inline_html(b[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "img":
            out.append(f"<p><img src='{html.escape(b[1])}' alt='{html.escape(b[2])}'></p>")
        elif kind == "table":
            head = "".join(f"<th>{_inline_html(h)}</th>" for h in b[1])
            body = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in row) + "</tr>" for row in b[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Charts


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def chart_cases(result: dict, path: Path) -> Path:
    """One bar per case (t(cutile-rs)/t(cuTile Python)), grouped by op, no empty margins."""
    plt = _plt()
    rows = [r for r in result["records"] if r.get("ratio_rs_over_cutile")]
    labels = [f"{r['op']} {SHORT.get(r['dtype'], r['dtype'])} {_shape(r)}" for r in rows]
    ratios = [r["ratio_rs_over_cutile"] for r in rows]
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9, 0.17 * n + 1.1))
    colors = ["tab:green" if v <= PARITY_BAR else "tab:red" for v in ratios]
    ax.barh(range(n), [v - 1.0 for v in ratios], left=1.0, color=colors, height=0.75)  # from parity
    for i in range(1, n):  # a thin line between ops
        if rows[i]["op"] != rows[i - 1]["op"]:
            ax.axhline(i - 0.5, color="#bbb", lw=0.5)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.axvline(PARITY_BAR, color="gray", lw=0.8, ls="--")
    ax.set_yticks(range(n), labels, fontsize=6.5)
    ax.set_ylim(n - 0.5, -0.5)  # first case on top, no empty band above or below
    ax.set_xlim(min(ratios + [1.0]) - 0.03, max(ratios + [PARITY_BAR]) + 0.03)
    ax.margins(y=0)
    ax.xaxis.set_ticks_position("both")
    ax.tick_params(axis="x", labeltop=True, labelsize=8)
    ax.set_xlabel(f"t(cutile-rs) / t(cuTile Python)  (lower is better; dashed: {PARITY_BAR})", fontsize=8)
    fig.tight_layout(pad=0.4)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def chart_ops(result: dict, path: Path) -> Path:
    """Per op: geomean ratio (bar) with its worst case (marker); % of the roof at the largest size."""
    plt = _plt()
    records = result["records"]
    summ = summarize(records)
    ops = [op for op in _op_order(records) if op in summ["per_op"]]
    geo = [summ["per_op"][op]["geomean_ratio"] for op in ops]
    worst = [summ["per_op"][op]["max_ratio"] for op in ops]
    n = len(ops)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.3 * n + 1.4), sharey=True)
    ax1.barh(range(n), [g - 1.0 for g in geo], left=1.0, height=0.7, label="geomean",
             color=["tab:green" if g <= PARITY_BAR else "tab:red" for g in geo])
    ax1.scatter(worst, range(n), marker="|", s=120, color="black", zorder=3, label="worst case")
    ax1.axvline(1.0, color="black", lw=0.8)
    ax1.axvline(PARITY_BAR, color="gray", lw=0.8, ls="--")
    ax1.set_yticks(range(n), ops, fontsize=8)
    ax1.set_ylim(n - 0.5, -0.5)
    ax1.set_xlim(min(geo + [1.0]) - 0.03, max(worst + [PARITY_BAR]) + 0.03)
    ax1.set_xlabel("t(cutile-rs) / t(cuTile Python)", fontsize=8)
    ax1.set_title(f"Parity per op (overall geomean {_fmt(summ['overall_geomean_ratio'])})", fontsize=9)
    ax1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, frameon=False)
    rs, ct = [], []
    for op in ops:
        recs = _largest([r for r in records if r["op"] == op])
        pick = next((r for r in recs if r["dtype"] == "bfloat16"), recs[0] if recs else None)
        key = "pct_cublas_bf16" if pick and pick["kind"] == "compute" else "pct_copy_bw"
        vals = (pick or {}).get(key) or {}
        rs.append(vals.get("cutile-rs") or 0)
        ct.append(vals.get("cutile") or 0)
    y = list(range(n))
    ax2.barh([v - 0.18 for v in y], rs, height=0.36, color="tab:blue", label="cutile-rs")
    ax2.barh([v + 0.18 for v in y], ct, height=0.36, color="tab:orange", label="cuTile Python")
    ax2.axvline(100, color="black", lw=0.8)
    ax2.axvline(COPY_BW_BAR, color="gray", lw=0.8, ls="--")
    ax2.set_xlabel("% of measured roof, bf16, largest size\n(memory: copy bandwidth; GEMM: cuBLAS bf16)", fontsize=8)
    ax2.set_title("Roofline", fontsize=9)
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    fig.tight_layout(pad=0.5)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def write_bench_report(results_json: Path, out_dir: Path, investigations: Path | None = None) -> list[Path]:
    """Write <stem>.md, <stem>.html and the charts <stem>.png (per case), <stem>-ops.png (per op).

    Investigations are read from `investigations`, default `<stem>.investigations.json` next to the
    results (absent: the report says which ops need one)."""
    results_json = Path(results_json)
    result = read_results(results_json)
    inv_path = Path(investigations) if investigations else investigations_path(results_json)
    inv = load_investigations(inv_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = results_json.stem
    paths: list[Path] = []
    charts: dict[str, str] = {}
    try:
        paths.append(chart_cases(result, out_dir / f"{stem}.png"))
        paths.append(chart_ops(result, out_dir / f"{stem}-ops.png"))
        charts = {"cases": f"{stem}.png", "ops": f"{stem}-ops.png"}
    except ImportError:
        charts = {}  # matplotlib not installed: the report has no charts, and says nothing false
    try:
        blocks = _blocks(result, inv, charts, inv_path.name)
    except (KeyError, TypeError, ValueError) as e:  # a record without the fields `tileport bench` writes
        raise ReportError(f"{results_json}: not `tileport bench` results ({type(e).__name__}: {e})") from None
    md = write_text_atomic(out_dir / f"{stem}.md", to_markdown(blocks))
    page = write_text_atomic(out_dir / f"{stem}.html", to_html(blocks))
    return [md, page] + paths


def read_results(path: Path) -> dict:
    """`tileport bench` results, or ReportError saying why the file is not that (missing, empty,
    not UTF-8 JSON, another shape)."""
    if not Path(path).is_file():  # missing, a folder, a device or a FIFO (reading /dev/zero never ends)
        raise ReportError(f"{path}: not a file")
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read: {e}") from None
    if not text.strip():
        raise ReportError(f"{path}: empty file, not `tileport bench` results")
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON ({e})") from None
    if not (isinstance(result, dict) and isinstance(result.get("records"), list)
            and all(isinstance(r, dict) for r in result["records"])
            and isinstance(result.get("environment"), dict) and isinstance(result.get("ceilings", {}), dict)):
        raise ReportError(f"{path}: not `tileport bench` results (needs an object with a list of records "
                          "and an environment)")
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tileport.report",
                                 description="Benchmark report, or a skeleton investigations file")
    ap.add_argument("results", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=None)
    ap.add_argument("--skeleton", action="store_true",
                    help="write <stem>.investigations.json with every op above 1.02 (refuses to overwrite)")
    args = ap.parse_args(argv)
    if args.skeleton:
        target = investigations_path(args.results)
        if target.exists():
            print(f"{target} exists; not overwriting")
            return 1
        write_text_atomic(target, json.dumps(investigation_skeleton(read_results(args.results)), indent=1) + "\n")
        print(f"wrote {target}")
        return 0
    for p in write_bench_report(args.results, args.out or args.results.parent):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
