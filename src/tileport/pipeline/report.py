"""The run report: `report.html` and `report.md` under --out, with a parity bar chart (`parity.png`)
when matplotlib is installed (`pip install tileport[report]`); without it the report says the chart
is absent. Per kernel: the route and its verdicts, the IR-diff summary, correctness, parity (fresh
or stale, and why), the final gate's missing evidence, and links to every artifact.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from tileport.atomic import write_text_atomic

from .engine import route_label
from .evidence import THRESHOLD
from .probe import SYNTHESIZED

STAGE_FILES = {"A": ["analysis.json"], "B": ["kernel.rs", "build.log", "findings.json", "irdiff"],
               "C": ["diff_report.md", "diagnosis.json"], "D": ["correctness.md", "ffi.rs", "host_checks.json"],
               "E": ["performance.md", "performance.json"], "F": ["perf_investigation.md"]}


def _verdicts(kdir: Path) -> dict[str, dict]:
    out = {}
    for p in sorted(kdir.glob("*/verdict.json")):
        try:
            out[p.parent.name] = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return out


def _latest(vs: dict[str, dict], stage: str) -> tuple[str, dict] | tuple[None, None]:
    keys = sorted((k for k in vs if k.rstrip("0123456789") == stage), key=lambda k: (len(k), k))
    return (keys[-1], vs[keys[-1]]) if keys else (None, None)


def kernel_facts(kdir: Path) -> dict[str, Any]:
    """Short texts and numbers about one kernel, read back from its artifacts."""
    vs = _verdicts(kdir)
    facts: dict[str, Any] = {"verdicts": vs}
    _, b = _latest(vs, "B")
    if b and b["verdict"] == "COMPILED":
        c = b["details"]["counts"]
        n_conf = len(b["details"]["ir_diff"])
        if c["CRITICAL"]:
            kinds = sorted({f"{f['category']}/{f['rule']}" for f in b["details"]["critical_pending"]
                            + b["details"]["critical_structural"]})
            facts["ir_text"] = f"{c['CRITICAL']} CRITICAL ({', '.join(kinds)}), {n_conf} configs"
        else:
            facts["ir_text"] = f"clean: 0 CRITICAL, {c['WARN']} WARN, {n_conf} configs"
        facts["ir_clean"] = not c["CRITICAL"]
    elif b:
        facts["ir_text"] = f"{b['verdict']}: {b['reason'][:120]}"
        facts["ir_clean"] = False
    else:
        facts["ir_text"], facts["ir_clean"] = "-", False
    _, a = _latest(vs, "A")
    if a and (a.get("details") or {}).get("config_source") == SYNTHESIZED:  # values tileport made up
        facts["ir_text"] += " on SYNTHESIZED probe values"
    _, d = _latest(vs, "D")
    if d is None:
        facts["d_text"] = "-"
    elif d["verdict"] == "ALL_PASS" or d["verdict"] == "FAIL":
        g = d["details"].get("grade") or {}
        facts["d_text"] = f"{d['verdict']} {g.get('passed', 0)}/{g.get('cases', 0)}" + (
            f" ({d['fail_class']})" if d.get("fail_class") else "")
    else:
        ev = d["details"].get("evidence") or {}
        stale = ev.get("stale_grade") or {}
        extra = "; stale evidence: " + "; ".join(f"{op}: {r}" for op, r in stale.items()) if stale else ""
        facts["d_text"] = f"{d['verdict']} ({d.get('fail_class') or '-'}){extra}"  # BLOCKED, FAIL_FIXABLE
    _, e = _latest(vs, "E")
    facts["parity"] = None
    if e is None:
        facts["e_text"] = "-"
    elif "geomean_ratio" in e["details"]:
        facts["e_text"] = (f"{e['verdict']} {e['details']['geomean_ratio']:.3f} vs {e['details']['reference_backend']}")
        facts["parity"] = {"ratio": e["details"]["geomean_ratio"], "fresh": True,
                           "vs_cutile": e["details"].get("geomean_ratio_vs_cutile"),
                           "reference": e["details"]["reference_backend"], "op": e["details"].get("op")}
    else:
        sg = (e["details"].get("evidence") or {}).get("stale_grade")
        if sg and sg.get("geomean_ratio"):
            op = e["details"].get("op")
            ev = (e["details"].get("evidence") or {}).get(op) or {}
            prov = ev.get("provenance") or {}
            facts["e_text"] = (f"BLOCKED ({e.get('fail_class')}); stale: {sg['geomean_ratio']:.3f} vs "
                               f"{sg['reference_backend']} (commit {str(prov.get('commit'))[:10]})")
            facts["parity"] = {"ratio": sg["geomean_ratio"], "fresh": False, "vs_cutile": sg.get("geomean_ratio_vs_cutile"),
                               "reference": sg["reference_backend"], "op": op, "commit": prov.get("commit"),
                               "why_stale": ev.get("reason", "")}
        else:
            facts["e_text"] = f"{e['verdict']} ({e.get('fail_class')})"
    return facts


def facts_of(outcome, out_dir: Path) -> dict[str, Any]:
    """`kernel_facts` of an outcome's kernel, read once and kept on the outcome (both reports use them)."""
    if not outcome.facts:
        outcome.facts = kernel_facts(out_dir / outcome.key)
    return outcome.facts


def parity_chart(out_dir: Path, rows: list[tuple[str, dict]]) -> tuple[Path | None, str]:
    """parity.png: geomean t(cutile-rs)/t(faster reference) per kernel; stale evidence hatched."""
    data = [(k, p) for k, p in rows if p]
    if not data:
        return None, "no kernel has benchmark evidence (fresh or stale): no parity chart"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "the parity chart is absent: matplotlib is not installed (pip install 'tileport[report]')"
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(data) + 2), 4.5))
    xs = range(len(data))
    for i, (k, p) in enumerate(data):
        ax.bar(i, p["ratio"], color="#4c9a2a" if p["fresh"] and p["ratio"] <= THRESHOLD else
               "#d9822b" if p["fresh"] else "#bbbbbb", hatch=None if p["fresh"] else "//", edgecolor="#555555")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(THRESHOLD, color="#c23030", linewidth=0.8, linestyle="--", label=f"DONE threshold {THRESHOLD}")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([k for k, _ in data], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("geomean t(cutile-rs) / t(faster reference)")
    ax.set_title("parity per kernel (hatched grey: stale evidence, not a verdict)")
    ax.legend(loc="upper left", fontsize=8)
    lo = min(p["ratio"] for _, p in data)
    ax.set_ylim(min(0.8, lo - 0.05), max(1.2, max(p["ratio"] for _, p in data) + 0.05))
    fig.tight_layout()
    path = out_dir / "parity.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, ""


def _links(out_dir: Path, key: str, route: list[dict]) -> list[tuple[str, str]]:
    kdir = out_dir / key
    links = []
    ran = {r["stage"] + ("" if r["attempt"] == 1 else str(r["attempt"])) for r in route}
    for sdir in sorted(p for p in kdir.iterdir() if p.is_dir() and p.name in ran) if kdir.is_dir() else []:
        stage = sdir.name.rstrip("0123456789")
        for name in STAGE_FILES.get(stage, []):
            p = sdir / name
            if p.exists():
                links.append((f"{sdir.name}/{name}", f"{key}/{sdir.name}/{name}"))
    for name in ("final.json", "run.json"):
        if (kdir / name).is_file():
            links.append((name, f"{key}/{name}"))
    return links


def write_report(out_dir: Path, outcomes, session, seconds: float) -> list[Path]:
    rows = [(x, facts_of(x, out_dir)) for x in outcomes]
    chart, chart_note = parity_chart(out_dir, [(x.key, f["parity"]) for x, f in rows])
    gpu_ok, gpu_why = session.gpu()
    ev = session.evidence
    head = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seconds": round(seconds, 1),
        "gpu": "available" if gpu_ok else gpu_why,
        "evidence": ", ".join(ev.files) or "none (--gpu-results not given)",
    }
    md = _markdown(rows, head, chart, chart_note, out_dir)
    write_text_atomic(out_dir / "report.md", md)
    write_text_atomic(out_dir / "report.html", _html(rows, head, chart, chart_note, out_dir))
    return [out_dir / "report.html", out_dir / "report.md"] + ([chart] if chart else [])


def _markdown(rows, head, chart, chart_note, out_dir) -> str:
    n_best = sum(1 for x, _ in rows if x.ok)
    lines = ["# tileport port report", "",
             f"- {head['date']}, {head['seconds']} s; GPU: {head['gpu']}",
             f"- GPU evidence: {head['evidence']}",
             f"- {len(rows)} kernel(s); {n_best} reached the best state attainable here "
             f"(DONE, or BLOCKED(env) with only GPU evidence missing)", "",
             "`*` = env close-out: E evaluated for the record after D was blocked by the environment.", "",
             "| kernel | route | terminal | IR diff | correctness (D) | parity (E) | final gate |",
             "|---|---|---|---|---|---|---|"]
    for x, f in rows:
        gate = "passed" if x.final.get("passed") else "; ".join(m.split(":")[0] for m in x.final.get("missing", []))
        steps = " → ".join(route_label(r) for r in x.route)
        lines.append(f"| {x.key} | {steps} | {x.terminal} | {f['ir_text']} | {_md(f['d_text'])} | "
                     f"{_md(f['e_text'])} | {_md(gate)} |")
    lines += ["", "## Parity", ""]
    lines.append(f"![parity]({chart.name})" if chart else f"_{chart_note}_")
    stale = [(x.key, f["parity"]) for x, f in rows if f["parity"] and not f["parity"]["fresh"]]
    if stale:
        lines += ["", "Stale benchmark evidence (shown, not graded):", ""]
        lines += [f"- {k}: {p['ratio']:.3f} ({p['op']}, commit {str(p.get('commit'))[:10]}): {p.get('why_stale', '')}"
                  for k, p in stale]
    lines += ["", "## Missing evidence per kernel (final gate)", ""]
    for x, _ in rows:
        if x.final.get("missing"):
            lines.append(f"### {x.key}")
            lines += [f"- {m}" for m in x.final["missing"]]
            lines.append("")
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return s.replace("|", "/").replace("\n", " ")


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top}th{background:#f0f0f0}.ok{color:#2a7a2a}
.warn{color:#a66a00}.bad{color:#b02020}.b{display:inline-block;padding:1px 5px;margin:1px;border-radius:3px;
font-size:11px;background:#eee}.b.PASS,.b.COMPILED,.b.ALL_PASS,.b.DONE,.b.ALIGNED{background:#d6f0d0}
.b.BLOCKED,.b.INVESTIGATE,.b.PASS_WITH_NOTES,.b.FIXABLE{background:#fbe8c0}.b.FAIL,.b.FAIL_FIXABLE,
.b.FAIL_COMPILE,.b.FAIL_COMPILER_BUG{background:#f6d0d0}details{font-size:12px}small{color:#666}"""


def _html(rows, head, chart, chart_note, out_dir) -> str:
    e = html.escape
    n_best = sum(1 for x, _ in rows if x.ok)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>tileport port report</title>"
             f"<style>{CSS}</style></head><body><h1>tileport port report</h1>",
             f"<p>{e(head['date'])}, {head['seconds']} s. GPU: {e(head['gpu'])}.<br>GPU evidence: {e(head['evidence'])}"
             f"<br>{len(rows)} kernel(s); <b>{n_best}</b> reached the best state attainable here (DONE, or "
             "BLOCKED(env) with only GPU evidence missing). <small>* = env close-out (E evaluated for the record "
             "after D was blocked by the environment).</small></p>",
             "<table><tr><th>kernel</th><th>route</th><th>terminal</th><th>IR diff</th><th>correctness (D)</th>"
             "<th>parity (E)</th><th>final gate</th><th>artifacts</th></tr>"]
    for x, f in rows:
        badges = "".join(f"<span class='b {e(r['verdict'])}' title='{e(r['reason'][:400])}'>"
                         f"{e(route_label(r))}</span>" for r in x.route)
        tcls = "ok" if x.terminal == "DONE" else "warn" if x.ok else "bad"
        missing = x.final.get("missing", [])
        gate = ("<span class='ok'>passed</span>" if x.final.get("passed") else
                f"<details><summary class='{'warn' if x.ok else 'bad'}'>{len(missing)} missing</summary><ul>"
                + "".join(f"<li>{e(m)}</li>" for m in missing) + "</ul></details>")
        links = " ".join(f"<a href='{e(href)}'>{e(label)}</a>" for label, href in _links(out_dir, x.key, x.route))
        parts.append(f"<tr><td><b>{e(x.key)}</b></td><td>{badges}</td><td class='{tcls}'>{e(x.terminal)}</td>"
                     f"<td class='{'ok' if f.get('ir_clean') else 'bad'}'>{e(f['ir_text'])}</td>"
                     f"<td>{e(f['d_text'])}</td><td>{e(f['e_text'])}</td><td>{gate}</td>"
                     f"<td><details><summary>files</summary>{links}</details></td></tr>")
    parts.append("</table><h2>Parity</h2>")
    parts.append(f"<img src='{e(chart.name)}' alt='parity chart'>" if chart else f"<p><i>{e(chart_note)}</i></p>")
    stale = [(x.key, f["parity"]) for x, f in rows if f["parity"] and not f["parity"]["fresh"]]
    if stale:
        parts.append("<p>Stale benchmark evidence (shown, not graded):</p><ul>" + "".join(
            f"<li>{e(k)}: {p['ratio']:.3f} vs {e(p['reference'])} ({e(str(p['op']))}, commit "
            f"{e(str(p.get('commit'))[:10])}): <small>{e(p.get('why_stale', ''))}</small></li>" for k, p in stale)
            + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
