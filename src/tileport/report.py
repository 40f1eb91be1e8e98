"""Benchmark reports: markdown and HTML (with matplotlib bar charts) from `tileport bench` JSON."""

from __future__ import annotations

import html
import json
from pathlib import Path


def _fmt(v, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _rows(result: dict) -> list[dict]:
    rows = []
    for r in result["records"]:
        t = r["times_us"]
        roof = r.get("pct_cublas_bf16") if r["kind"] == "compute" else r.get("pct_copy_bw")
        rate = r.get("tflops") if r["kind"] == "compute" else r.get("gbps")
        rows.append({
            "op": r["op"], "dtype": r["dtype"], "shape": "x".join(map(str, r["shape"])),
            "torch_us": t.get("torch"), "cutile_us": t.get("cutile"), "rs_us": t.get("cutile-rs"),
            "ratio": r.get("ratio_rs_over_cutile"),
            "unit": "TFLOP/s" if r["kind"] == "compute" else "GB/s",
            "rate_rs": (rate or {}).get("cutile-rs"), "rate_cutile": (rate or {}).get("cutile"),
            "rate_torch": (rate or {}).get("torch"),
            "roof_rs": (roof or {}).get("cutile-rs"), "errors": r.get("errors", {}),
        })
    return rows


def markdown(result: dict) -> str:
    env, ceil, summ = result["environment"], result["ceilings"], result.get("summary", {})
    lines = ["# tileport parity benchmark", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, cuda-tile {env['cuda_tile']}, "
             f"{env['tileiras']}",
             f"- commit `{env['commit']}`, {env['date']}; command: `{env['command']}`",
             f"- measured ceilings: device copy {ceil['copy_gbps']:.0f} GB/s; cuBLAS bf16 8192^3 "
             f"{ceil['cublas_bf16_tflops']:.0f} TFLOP/s (datasheet {ceil['bf16_datasheet_tflops']:.0f})",
             "- times: median GPU kernel time (profiler events, L2 flushed before each repetition)", "",
             f"**Overall geomean t(cutile-rs)/t(cuTile Python): {_fmt(summ.get('overall_geomean_ratio'))}**", "",
             "| op | geomean ratio | max ratio | cases |", "|---|---|---|---|"]
    for op, s in sorted(summ.get("per_op", {}).items()):
        lines.append(f"| {op} | {_fmt(s['geomean_ratio'])} | {_fmt(s['max_ratio'])} | {s['cases']} |")
    lines += ["", "| op | dtype | shape | torch µs | cuTile µs | cutile-rs µs | rs/cuTile | rate (rs) | % roof (rs) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in _rows(result):
        lines.append(f"| {r['op']} | {r['dtype']} | {r['shape']} | {_fmt(r['torch_us'], '.1f')} | "
                     f"{_fmt(r['cutile_us'], '.1f')} | {_fmt(r['rs_us'], '.1f')} | {_fmt(r['ratio'])} | "
                     f"{_fmt(r['rate_rs'], '.0f')} {r['unit']} | {_fmt(r['roof_rs'], '.1f')} |")
    errors = [(r, b, e) for r in _rows(result) for b, e in r["errors"].items()]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {r['op']} {r['dtype']} {r['shape']} {b}: {e}" for r, b, e in errors]
    lo = result.get("launch_overhead_us")
    if lo:
        lines += ["", "## Host launch overhead (µs per call, one-block vector_add)", ""]
        lines += [f"- {k}: {v:.1f}" for k, v in lo.items()]
    return "\n".join(lines) + "\n"


def chart(result: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in _rows(result) if r["ratio"]]
    labels = [f"{r['op']} {r['dtype']} {r['shape']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    fig, ax = plt.subplots(figsize=(10, max(3, 0.28 * len(rows))))
    colors = ["tab:green" if v <= 1.02 else "tab:red" for v in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.axvline(1.02, color="gray", lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("t(cutile-rs) / t(cuTile Python)  (lower is better; dashed: 1.02)")
    ax.set_title("Parity per case")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def html_page(result: dict, chart_name: str | None) -> str:
    md = markdown(result)
    body = "".join(f"<tr>{''.join(f'<td>{html.escape(c.strip())}</td>' for c in line.strip('|').split('|'))}</tr>"
                   if line.startswith("|") and not line.startswith("|---") else
                   f"<p>{html.escape(line)}</p>" if line.strip() else "" for line in md.splitlines())
    img = f'<img src="{chart_name}" alt="parity chart">' if chart_name else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>tileport benchmark</title>"
            f"<style>body{{font-family:sans-serif}} td{{border:1px solid #ccc;padding:2px 6px}}</style></head>"
            f"<body>{img}<table>{body}</table></body></html>")


def write_bench_report(results_json: Path, out_dir: Path) -> list[Path]:
    result = json.loads(Path(results_json).read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(results_json).stem
    md = out_dir / f"{stem}.md"
    md.write_text(markdown(result))
    paths = [md]
    try:
        png = chart(result, out_dir / f"{stem}.png")
        paths.append(png)
        chart_name = png.name
    except ImportError:
        chart_name = None  # matplotlib not installed: the HTML has no chart, and says nothing false
    page = out_dir / f"{stem}.html"
    page.write_text(html_page(result, chart_name))
    return paths + [page]
