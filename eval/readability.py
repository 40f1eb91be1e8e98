"""How the corpus port reads: per kernel, lines of Rust against the cuTile Python source, `unsafe` count, launcher
lines and a side-by-side excerpt, for the committed (idiomatic) crate and the faithful rendering of the same
translation. Writes docs/readability.md.

    PYTHONPATH=src python3 eval/readability.py [--out docs/readability.md]

Lines are code lines: not blank, not a comment, not a docstring. A kernel's Python lines are its function's body
and the bodies of the module functions it calls (the translator inlines them); its Rust lines are the body of its
entry (of the shared device function when the entry only calls one), the largest over its specialized entries.
Nothing of a kernel file runs (it is read with `ast`).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The kernels the body target applies to (lines of Rust at most twice the Python source's).
TARGET_FAMILIES = {"element-wise": ("vector_add", "relu", "gelu", "silu_and_mul", "swiglu", "geglu"),
                   "norm": ("rms_norm", "layer_norm"), "softmax": ("softmax",)}
TARGET_RATIO = 2.0
LAUNCHER_LINES = 25  # the launcher target (lines of the C launcher, doc comment included)
# Why a kernel of the body target is longer than the target: what each statement past the source's lines holds
# (a kernel marked ✗ without a reason, or a reason for a kernel within the target, is an error).
TYPED_LETS = ("cutile 0.5.0 types a reduction (`reduce_max`, `reduce_sum`), a cast (`convert_tile`) and a call of a "
              "device function (`exp_approx`) only by a typed `let`, not inside another expression, and has no "
              "keepdims reduction (a `reshape` follows each)")
WHY_LONGER = {
    "layer_norm_fwd_prefetch_kernel":
        f"{TYPED_LETS}; `min` on i32 takes no expression operand (cutile types it by the kernel's element type: "
        "`binary Min requires operands of the same type, but got i32 and E`), so `rb + num_blocks` is a `let`; the "
        "values cuTile Python hoists out of the loop (`n_cols` as f32, twice, and the broadcasts of the weights, "
        "bias, mask and eps) are a statement each, kept for the same Tile IR.",
    "softmax_tma_lean_kernel":
        f"{TYPED_LETS}: a source line such as `ct.astype(ct.max(t, 1, keepdims=True), ct.float32)` is three "
        "statements; `ct.astype(t, ct.float32)` written twice is two casts, as in cuTile Python's Tile IR; a "
        "broadcast written into `exp_approx`'s operand passes rustfmt's 100 columns, so it is a line either way.",
    "softmax_split_write_kernel":
        f"{TYPED_LETS}; a broadcast written into `exp_approx`'s operand passes rustfmt's 100 columns, so it is a "
        "line either way.",
    "softmax_online_rev_kernel":
        f"the body inlines the source's helpers as cuTile Python traces them: the online update is written twice "
        "(the loop and the last chunk) and the loop invariants cuTile Python hoists are a statement each. Shortening "
        "it takes writing the helpers back as device functions (not done), besides the typing: {TYPED_LETS}.",
    "softmax_gather_kernel":
        "`ct.gather` / `ct.scatter` of a tile expand, as cuTile Python expands them, into pointer arithmetic per "
        "index (widen to u64, broadcast, stride product, offset; the loop-invariant part hoisted out of the loop): "
        "cutile 0.5.0 has no gather or scatter over a `Tensor`, only `load_ptr_tko` / `store_ptr_tko` on pointer "
        "tiles, so each step is a typed `let` (a `PointerTile` is never inferred).",
}
EXCERPT_LINES = 24


# ---------------------------------------------------------------- Python

def _code_lines(lines: list[str]) -> int:
    return sum(1 for line in lines if line.strip() and not line.strip().startswith(("#", "//")))


def python_body(tree: ast.Module, text: list[str], name: str) -> tuple[list[str], list[str]]:
    """(code lines of `name`'s body and of the module functions it calls, transitively; the function's own
    source lines from its decorator to its end)."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, order, todo = set(), [], [name]
    while todo:
        fn = functions.get(todo.pop(0))
        if fn is None or fn.name in seen:
            continue
        seen.add(fn.name)
        order.append(fn)
        todo += [c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    body: list[str] = []
    for fn in order:
        stmts = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
        if stmts:
            body += text[stmts[0].lineno - 1:fn.end_lineno]
    own = functions[name]
    start = min([d.lineno for d in own.decorator_list] + [own.lineno])
    return body, text[start - 1:own.end_lineno]


# ---------------------------------------------------------------- Rust

@dataclass
class Item:
    """A Rust item of a module file: its lines (doc comment to closing brace) and its body's lines."""

    lines: list[str]
    body: list[str]


def rust_item(text: list[str], pattern: str, indent: str) -> Item | None:
    """The item whose signature line matches `pattern` (at `indent`), with the doc and attribute lines above it."""
    start = next((i for i, line in enumerate(text) if re.match(indent + pattern, line)), None)
    if start is None:
        return None
    first = start
    while first > 0 and text[first - 1].startswith((indent + "///", indent + "#[")):
        first -= 1
    open_ = next(i for i in range(start, len(text)) if text[i].rstrip().endswith("{"))
    end = next(i for i in range(open_ + 1, len(text)) if text[i].rstrip() == indent + "}")
    return Item(text[first:end + 1], text[open_ + 1:end])


def entry_body(text: list[str], entry: str) -> Item | None:
    """An entry; when its body only calls a shared device function, that function's body."""
    item = rust_item(text, rf"pub (unsafe )?fn {entry}\b", "    ")
    if item is None:
        return None
    code = " ".join(line.strip() for line in item.body if line.strip())
    call = re.fullmatch(r"(\w+)(::<[^;]*>)?\([^;]*\);", code)  # the body is one call (rustfmt may wrap it)
    if call:
        shared = rust_item(text, rf"fn {call.group(1)}\b", "    ")
        if shared is not None:
            return Item(item.lines, shared.body)
    return item


def unsafe_count(lines: list[str]) -> int:
    return sum(len(re.findall(r"\bunsafe\b", line)) for line in lines)


# ---------------------------------------------------------------- the table

@dataclass
class Row:
    kernel: str
    module: str
    python: int
    rust: int
    faithful: int
    entries: int
    unsafe: int
    unsafe_faithful: int
    launcher: int
    launcher_faithful: int
    tables: int = 0  # lines of the entry tables its launcher reads (consts written before it)
    family: str = ""
    excerpt: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    @property
    def ratio(self) -> float:
        return self.rust / max(1, self.python)


def family_of(module: str) -> str:
    return next((f for f, mods in TARGET_FAMILIES.items() if module in mods), "")


def measure(entry: dict, idiomatic: dict[str, list[str]], faithful: dict[str, list[str]]) -> Row:
    source = REPO / entry["source"]
    text = source.read_text().splitlines()
    body, own = python_body(ast.parse("\n".join(text)), text, entry["kernel"])
    mod = f"src/{entry['module']}.rs"
    names = [v["entry"] for v in entry["variants"]]

    def side(files: dict[str, list[str]]) -> tuple[int, int, int, Item]:
        items = [entry_body(files[mod], n) for n in names]
        launcher = rust_item(files[mod], rf'pub (unsafe )?extern "C" fn {entry["symbol"]}\b', "")
        biggest = max(items, key=lambda it: _code_lines(it.body))
        device_unsafe = sum(unsafe_count(it.lines) + unsafe_count(it.body) for it in items)
        return _code_lines(biggest.body), device_unsafe, len(launcher.lines) if launcher else 0, biggest
    rust, unsafe, launcher, biggest = side(idiomatic)
    faithful_rust, unsafe_f, launcher_f, _ = side(faithful)
    return Row(entry["kernel"], entry["module"], _code_lines(body), rust, faithful_rust, len(names), unsafe,
               unsafe_f, launcher, launcher_f, entry_tables(idiomatic[mod], entry["module"], entry["kernel"]),
               family_of(entry["module"]),
               ([line for line in own if line.strip()][:EXCERPT_LINES],
                [line[8:] if line.startswith(" " * 8) else line.strip() for line in biggest.body
                 if line.strip()][:EXCERPT_LINES]))


def entry_tables(text: list[str], module: str, kernel: str) -> int:
    """Lines of the entry tables (`Entries` consts, doc comment included) of a kernel's launcher."""
    head = f"/// The entries of `{module}::{kernel}` "
    starts = [i for i, line in enumerate(text) if line.startswith(head)]
    return sum(next(j for j in range(i, len(text)) if text[j] == "};") - i + 1 for i in starts)


def crate_totals(files: dict[str, list[str]]) -> dict:
    rs = {k: v for k, v in files.items() if k.endswith(".rs")}
    entries = r"#\[cutile::entry\([^\n]*\)\]\n\s*pub unsafe fn\b"
    return {"lines": sum(len(v) for v in rs.values()), "unsafe": sum(unsafe_count(v) for v in rs.values()),
            "pub_unsafe_fn": sum(len(re.findall(r"\bpub unsafe fn\b", "\n".join(v))) for v in rs.values()),
            "unsafe_entries": sum(len(re.findall(entries, "\n".join(v))) for v in rs.values())}


def render(rows: list[Row], totals: dict, totals_f: dict) -> str:
    launchers = [r.launcher for r in rows]
    met = [r for r in rows if r.family]
    out = ["# Readability of the corpus port", "",
           "Generated by `eval/readability.py` from the committed crate (`rust/`, idiomatic: the default of "
           "`tileport translate`) and the faithful rendering of the same translation (`tileport translate "
           "--faithful`); do not edit by hand. Both compile to the same Tile IR "
           "([proof](../bench/results/idiomatic-vs-faithful.json)).", "",
           "| | idiomatic | faithful |", "| --- | --- | --- |",
           f"| lines in `rust/src` | {totals['lines']} | {totals_f['lines']} |",
           f"| `unsafe` in `rust/src` | {totals['unsafe']} | {totals_f['unsafe']} |",
           f"| `pub unsafe fn` kernel entries | {totals['unsafe_entries']} | {totals_f['unsafe_entries']} |",
           f"| `pub unsafe fn` in all (with the Tile IR op declarations of `tiles.rs`) | "
           f"{totals['pub_unsafe_fn']} | {totals_f['pub_unsafe_fn']} |",
           f"| launcher lines (max / median) | {max(launchers)} / {statistics.median(launchers):g} | "
           f"{max(r.launcher_faithful for r in rows)} / {statistics.median(r.launcher_faithful for r in rows):g} |",
           f"| launchers within {LAUNCHER_LINES} lines | {sum(n <= LAUNCHER_LINES for n in launchers)} / {len(rows)} | "
           f"{sum(r.launcher_faithful <= LAUNCHER_LINES for r in rows)} / {len(rows)} |",
           f"| entry tables the launchers read (kernels / lines) | {sum(bool(r.tables) for r in rows)} / "
           f"{sum(r.tables for r in rows)} | - |",
           f"| element-wise, norm and softmax kernels with Rust ≤ {TARGET_RATIO:g}× Python | "
           f"{sum(r.ratio <= TARGET_RATIO for r in met)} / {len(met)} | "
           f"{sum(r.faithful <= TARGET_RATIO * r.python for r in met)} / {len(met)} |", "",
           "Per kernel: code lines of the Python kernel (with the helpers it calls) and of one Rust entry's body "
           "(the largest of its specialized entries), `unsafe` in its entries, lines of its C launcher (doc "
           "comment included) and of the entry tables it reads (written before it).", "",
           "| kernel | family | Python | Rust | ratio | faithful Rust | entries | `unsafe` | faithful `unsafe` "
           "| launcher | entry tables | faithful launcher |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mark = "" if not r.family else " ✓" if r.ratio <= TARGET_RATIO else " ✗"
        out.append(f"| `{r.kernel}` | {r.family or '-'} | {r.python} | {r.rust} | {r.ratio:.2f}{mark} | "
                   f"{r.faithful} | {r.entries} | {r.unsafe} | {r.unsafe_faithful} | {r.launcher} | "
                   f"{r.tables or '-'} | {r.launcher_faithful} |")
    over = [r for r in met if r.ratio > TARGET_RATIO]
    if {r.kernel for r in over} != set(WHY_LONGER):
        raise SystemExit(f"WHY_LONGER is stale: kernels over {TARGET_RATIO:g}x {sorted(r.kernel for r in over)}, "
                         f"reasons for {sorted(WHY_LONGER)}")
    if over:
        out += ["", f"## Bodies longer than {TARGET_RATIO:g}× the source", ""]
        out += [f"- `{r.kernel}` ({r.rust} / {r.python} lines): {WHY_LONGER[r.kernel]}" for r in over]
    out += ["", "## Side by side", "", f"The first {EXCERPT_LINES} lines of each kernel: the cuTile Python "
            "function, and the body of its idiomatic Rust entry (or of the device function it shares).", ""]
    for r in rows:
        py, rs = r.excerpt
        out += [f"<details><summary><code>{r.kernel}</code> ({r.module})</summary>", "",
                "<table><tr><th>cuTile Python</th><th>cuTile Rust</th></tr><tr><td>", "",
                "```python", *py, "```", "", "</td><td>", "", "```rust", *rs, "```", "", "</td></tr></table>", "",
                "</details>", ""]
    return "\n".join(out)


def faithful_files() -> dict[str, list[str]]:
    from tileport.corpus import translate_corpus
    from tileport.emit.rust.crate import format_crate
    report = translate_corpus(None, faithful=True)
    return {k: v.splitlines() for k, v in format_crate(report.files).items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "readability.md")
    ap.add_argument("--crate", type=Path, default=REPO / "rust", help="the idiomatic crate")
    args = ap.parse_args(argv)
    idiomatic = {str(p.relative_to(args.crate)): p.read_text().splitlines() for p in args.crate.glob("src/*.rs")}
    faithful = faithful_files()
    manifest = json.loads((args.crate / "kernels.json").read_text())
    rows = [measure(e, idiomatic, faithful) for e in manifest["entries"]]
    args.out.write_text(render(rows, crate_totals(idiomatic), crate_totals(faithful)) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
