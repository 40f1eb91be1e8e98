#!/usr/bin/env bash
# Grade, here (the CPU machine with cargo and the CUDA Tile toolchain), the GPU evidence of an H200 run of
# `bash .device/enter.sh bash scripts/h200.sh evidence [pytest]` and keep the batch report:
#   bash scripts/h200-grade.sh DIR          # DIR: the files the GPU run copied to $OUT (gpu-evidence-*.json, gpu.txt...)
# runs `tileport port --corpus src/tileport/ops/kernels -j $JOBS --gpu-results DIR --out $PORT_OUT` (stages A-C
# here, D and E graded from the evidence; fresh only when it was recorded for this very tree) and writes to
# $RESULTS (default bench/results), named $NAME (default <today>-h200-port); $GPU_COMMAND: the command the GPU run
# ran, for the report's provenance (default: the evidence step of scripts/h200.sh):
#   NAME.md / NAME.html / NAME.png   the batch report (markdown, HTML, parity chart), with the provenance on top
#   NAME.json                        tileport port's summary.json (route, verdicts and reasons per kernel)
#   NAME-evidence.tar.gz             the evidence graded (DIR's JSON files and gpu.txt), to grade it again later
# Exit code: tileport port's (0 when every kernel reached its best attainable state), or 1 when the report
# could not be written. The summary line says how many kernels reached DONE.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/h200-grade.sh DIR (the fetched results of scripts/h200.sh evidence)}
[ -d "$dir" ] || { echo "h200-grade: $dir is not a directory" >&2; exit 2; }
port_out=${PORT_OUT:-out/port-h200}
results=${RESULTS:-bench/results}
name=${NAME:-$(date -u +%F)-h200-port}
set +e
python3 -m tileport.cli port --corpus src/tileport/ops/kernels -j "${JOBS:-2}" --no-gpu --gpu-results "$dir" \
  --out "$port_out"
rc=$?
set -e
[ -f "$port_out/report.md" ] && [ -f "$port_out/summary.json" ] || { echo "h200-grade: no report in $port_out" >&2; exit 1; }
mkdir -p "$results"
python3 - "$dir" "$port_out" "$results" "$name" <<'EOS'
import json, os, sys
from pathlib import Path

src, port_out, results, name = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
summary = json.loads((port_out / "summary.json").read_text())
gpu = (src / "gpu.txt").read_text().strip() if (src / "gpu.txt").is_file() else "unknown (no gpu.txt)"
prov = []
for f in sorted(src.glob("gpu-evidence*.json")):
    p = json.loads(f.read_text()).get("provenance", {})
    prov.append(f"- `{f.name}`: commit {p.get('commit')}, recorded {p.get('date')}, GPU {p.get('gpu') or '-'}; "
                f"selection {json.dumps(p.get('selection', {}))}; incomplete {json.dumps(p.get('incomplete', {}))}")
done = sum(1 for k in summary["kernels"] if k["terminal"] == "DONE")
head = [f"- GPU (nvidia-smi: name, driver, memory): {gpu}",
        f"- GPU run: `{os.environ.get('GPU_COMMAND') or 'bash .device/enter.sh bash scripts/h200.sh evidence'}`, graded here: "
        f"`{summary['command']}`", *prov,
        f"- **{done}/{len(summary['kernels'])} kernel(s) DONE**", ""]
md = (port_out / "report.md").read_text().splitlines()
md = md[:1] + [""] + head + md[1:]
(results / f"{name}.md").write_text("\n".join(md).replace("](parity.png)", f"]({name}.png)") + "\n")
html = (port_out / "report.html").read_text().replace("src='parity.png'", f"src='{name}.png'")
esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
html = html.replace("<h1>tileport port report</h1>", "<h1>tileport port report</h1><ul>" +
                    "".join(f"<li>{esc(line[2:])}</li>" for line in head if line.startswith("- ")) + "</ul>", 1)
(results / f"{name}.html").write_text(html)
(results / f"{name}.json").write_text(json.dumps({k: v for k, v in summary.items() if k != "records"}, indent=1) + "\n")
if (port_out / "parity.png").is_file():
    (results / f"{name}.png").write_bytes((port_out / "parity.png").read_bytes())
print(f"h200-grade: {done}/{len(summary['kernels'])} kernel(s) DONE; report {results / (name + '.md')}")
EOS
kept=$(cd "$dir" && ls gpu-evidence*.json gpu.txt pytest-gpu.json 2>/dev/null || true)
if [ -n "$kept" ]; then (cd "$dir" && tar -czf - $kept) > "$results/$name-evidence.tar.gz"; fi
exit "$rc"
