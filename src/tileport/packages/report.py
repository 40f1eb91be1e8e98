"""The library report of package mode: OUT/library.json and OUT/library.html (self-contained, sortable).

Per kernel: module, file:line, found / translated / IR-clean (CRITICAL findings of the IR diff) /
GPU-correct / parity from the pipeline when its stages ran (`-` otherwise), and the diagnostic of each
failure (construct, file:line:col, hint); totals per module and for the package; the files of other
vendors' back ends that were skipped, and why.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from tileport.atomic import write_text_atomic

from .library import KernelRow, Library

TOP_CAUSES = 10


def totals(rows: list[KernelRow]) -> dict:
    found = len(rows)
    translated = sum(r.translated for r in rows)
    ported = [r for r in rows if r.ir_critical is not None]
    return {"found": found, "translated": translated,
            "rate": round(translated / found, 4) if found else None,
            "ir_diffed": len(ported), "ir_clean": sum(r.ir_critical == 0 for r in ported),
            "gpu_checked": sum(r.gpu_correct is not None for r in rows),
            "gpu_correct": sum(bool(r.gpu_correct) for r in rows),
            "parity_measured": sum(r.parity is not None for r in rows)}


def causes(rows: list[KernelRow], top: int = TOP_CAUSES) -> list[dict]:
    """The most frequent failing constructs, with an example each."""
    counts = Counter(r.diagnostic.get("construct") or "?" for r in rows if r.diagnostic)
    example = {}
    for r in rows:
        if r.diagnostic:
            example.setdefault(r.diagnostic.get("construct") or "?", r.diagnostic)
    return [{"construct": c, "kernels": n, "example": _where(example[c]) + " " + example[c]["message"]}
            for c, n in counts.most_common(top)]


def library_doc(lib: Library) -> dict:
    modules: dict[str, list[KernelRow]] = {}
    for r in lib.rows:
        modules.setdefault(r.module, []).append(r)
    return {**lib.to_dict(), "totals": totals(lib.rows), "causes": causes(lib.rows),
            "per_module": {m: totals(rows) for m, rows in sorted(modules.items())}}


def write_library(lib: Library, out: Path) -> tuple[Path, Path]:
    """OUT/library.json and OUT/library.html."""
    doc = library_doc(lib)
    return (write_text_atomic(out / "library.json", json.dumps(doc, indent=1) + "\n"),
            write_text_atomic(out / "library.html", render_html(doc)))


def _where(d: dict | None) -> str:
    if not d or not d.get("file"):
        return ""
    return f"{d['file']}:{d.get('line') or '?'}:{d.get('col') or '?'}"


def _cell(value) -> str:
    return "-" if value is None else html.escape(str(value))


def _mark(ok: bool | None) -> str:
    return "-" if ok is None else ("<span class=ok>yes</span>" if ok else "<span class=bad>no</span>")


def render_html(doc: dict) -> str:
    t = doc["totals"]
    rate = f"{100 * t['rate']:.1f} %" if t["rate"] is not None else "-"
    head = (f"<h1>tileport library report: {html.escape(doc['label'])}</h1>"
            f"<p>{html.escape(doc['kind'])} <code>{html.escape(doc['root'])}</code>; {doc['modules']} modules indexed, "
            f"{doc['scanned']} scanned for kernels, {len(doc['skipped'])} skipped (other vendors' back ends); "
            f"{doc['seconds']} s.</p>"
            f"<p class=big>kernels found <b>{t['found']}</b>, translated <b>{t['translated']}</b> ({rate}); "
            f"IR-clean {t['ir_clean']} of {t['ir_diffed']} diffed; GPU-correct {t['gpu_correct']} of "
            f"{t['gpu_checked']} checked; parity measured for {t['parity_measured']}.</p>"
            + (f"<p>crate: <code>{html.escape(doc['crate'])}</code></p>" if doc.get("crate") else ""))
    kernel_rows = "".join(_kernel_row(r, doc["rust_modules"]) for r in doc["rows"])
    kernels = _table("kernels", ["module", "kernel", "file:line", "frontend", "translated", "entries",
                                 "stage", "IR CRIT", "GPU", "parity", "diagnostic (construct, where, hint)"],
                     kernel_rows)
    module_rows = "".join(
        f"<tr><td>{html.escape(m)}</td><td>{x['found']}</td><td>{x['translated']}</td>"
        f"<td>{'-' if x['rate'] is None else round(100 * x['rate'])}</td><td>{x['ir_clean']}/{x['ir_diffed']}</td>"
        f"<td>{x['gpu_correct']}/{x['gpu_checked']}</td></tr>" for m, x in doc["per_module"].items())
    modules = _table("modules", ["module", "found", "translated", "rate %", "IR-clean", "GPU-correct"], module_rows)
    cause_rows = "".join(f"<tr><td>{html.escape(c['construct'])}</td><td>{c['kernels']}</td>"
                         f"<td>{html.escape(c['example'])}</td></tr>" for c in doc["causes"])
    skipped_rows = "".join(f"<tr><td>{html.escape(s['module'])}</td><td>{html.escape(s['file'])}</td>"
                           f"<td>{html.escape(s['why'])}</td></tr>" for s in doc["skipped"])
    problem_rows = "".join(f"<tr><td>{html.escape(p['module'])}</td><td>{html.escape(_where(p['diagnostic']))}</td>"
                           f"<td>{html.escape(p['diagnostic']['message'])}</td></tr>" for p in doc["problems"])
    body = (head + "<h2>Kernels</h2>" + kernels + "<h2>Per module</h2>" + modules
            + "<h2>Top failure causes</h2>" + _table("causes", ["construct", "kernels", "example"], cause_rows)
            + "<h2>Skipped: other vendors' back ends</h2>"
            + _table("skipped", ["module", "file", "why"], skipped_rows)
            + "<h2>Files that could not be read</h2>" + _table("problems", ["module", "where", "why"], problem_rows))
    return PAGE.replace("@TITLE@", html.escape(f"tileport: {doc['label']}")).replace("@BODY@", body)


def _kernel_row(r: dict, rust_modules: dict) -> str:
    d = r["diagnostic"]
    why = "" if not d else (f"<b>[{html.escape(d.get('construct') or '?')}]</b> {html.escape(_where(d))} "
                            f"{html.escape(d['message'])}" + (f"<br><i>hint: {html.escape(d['hint'])}</i>"
                                                              if d.get("hint") else ""))
    rust = rust_modules.get(r["module"])
    title = f" title='Rust module {html.escape(rust)}'" if rust and r["translated"] else ""
    parity = "-" if r["parity"] is None else f"{r['parity']:.3f}"
    return (f"<tr><td{title}>{html.escape(r['module'])}</td><td>{html.escape(r['kernel'])}</td>"
            f"<td>{html.escape(r['file'])}:{r['line']}</td><td>{r['frontend']}</td><td>{_mark(r['translated'])}</td>"
            f"<td>{r['entries']}</td><td>{_cell(r['terminal'])}</td><td>{_cell(r['ir_critical'])}</td>"
            f"<td>{_mark(r['gpu_correct'])}</td><td>{parity}</td><td>{why}</td></tr>")


def _table(name: str, columns: list[str], rows: str) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th onclick='sortBy(this)'>{html.escape(c)}</th>" for c in columns)
    return f"<table id={name}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>@TITLE@</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
th.asc::after { content: " \\25B2"; } th.desc::after { content: " \\25BC"; }
.ok { color: #17702a; } .bad { color: #b00020; font-weight: bold; } .big { font-size: 1.15em; }
code { background: #f6f6f6; padding: 0 3px; }
</style>
<script>
function sortBy(th) {
  const table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
  const asc = !th.classList.contains("asc");
  table.querySelectorAll("th").forEach(h => h.classList.remove("asc", "desc"));
  th.classList.add(asc ? "asc" : "desc");
  const key = tr => tr.cells[col].innerText.trim();
  const num = s => s !== "" && s !== "-" && !isNaN(Number(s));
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = key(a), y = key(b);
    const c = num(x) && num(y) ? Number(x) - Number(y) : x.localeCompare(y, undefined, {numeric: true});
    return asc ? c : -c;
  });
  rows.forEach(r => body.appendChild(r));
}
</script></head>
<body>@BODY@</body></html>
"""
