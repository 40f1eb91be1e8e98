"""GPU measurement: which online-softmax configuration should be softmax_online's default?

    python3 eval/measure/online_configs.py STAGE OUT.json        (on the GPU machine; STAGE below)

The forward kernel (softmax_online_kernel, BLOCK_M 1, CHUNK 4096) was the default; its port compiles to other
machine code than cuTile Python's for f16 and bf16 on sm_90 (the IR differs only by the cutile crate's bounded
assumptions). BLOCK_M 2, and the last-first kernel (softmax_online_rev_kernel) at CHUNK 4096, compile to cuTile
Python's machine code on sm_80, sm_90 and sm_100 (`tileport verify`). This script times configurations on both tile
backends side by side (gpu.timing.gpu_times, L2 flushed, every runner in one interleaved rotation, three rounds)
so that the default follows cuTile Python's fastest configuration, not the port's. Stages, in the order they ran:
  block_m     forward kernel, BLOCK_M 1 / 2 x CHUNK 4096 / 2048, 16-bit, 4096x4096 and 1024x16384;
  one_chunk   forward and last-first, BLOCK_M 1 / 2, CHUNK 4096, every dtype, 4096x4096 (rows of one chunk);
  chunks      forward and last-first, BLOCK_M 1, CHUNK 4096 / 8192, 16-bit, 1024x16384;
  chunks_f32  the same for f32.
The last-first kernel at rows of 2 and 4 chunks lay outside the declared space when this ran (the script then
bypassed the search's configuration check); every configuration here is a declared candidate now.
Results: bench/results/2026-12-03-h200-softmax-online-configs.json.
"""
import json
import sys

from tileport.gpu.autotune import Problem
from tileport.gpu.timing import gpu_times, make_flush
from tileport.ops.specs import get_spec

KERNELS = {"fwd": "softmax_online_kernel", "rev": "softmax_online_rev_kernel"}
BACKENDS = ("cutile", "cutile-rs")
HALF = ("float16", "bfloat16")


def configs(kernels: tuple, block_ms: tuple, chunks: tuple) -> dict:
    return {f"{k}-BM{bm}-C{chunk}": {"variant": "online", "kernel": KERNELS[k], "CHUNK": chunk, "BLOCK_M": bm,
                                     "grid": "persistent"}
            for k in kernels for chunk in chunks for bm in block_ms}


STAGES = {  # name: (dtypes, shapes, configurations)
    "block_m": (HALF, ((4096, 4096), (1024, 16384)), configs(("fwd",), (1, 2), (4096, 2048))),
    "one_chunk": (HALF + ("float32",), ((4096, 4096),), configs(("fwd", "rev"), (1, 2), (4096,))),
    "chunks": (HALF, ((1024, 16384),), configs(("fwd", "rev"), (1,), (4096, 8192))),
    "chunks_f32": (("float32",), ((1024, 16384),), configs(("fwd", "rev"), (1,), (4096, 8192))),
}


def runners(problem: Problem, cfgs: dict) -> dict:
    runs = {}
    for name, cfg in cfgs.items():
        for backend in BACKENDS:
            run = problem.runner(backend, cfg)
            ok, ratio, msg = problem.check(run)
            if not ok:
                raise SystemExit(f"{problem.dtype} {problem.shape} {name} {backend}: {msg} ({ratio})")
            runs[f"{backend}:{name}"] = run
    return runs


def main(stage: str, out_path: str) -> None:
    dtypes, shapes, cfgs = STAGES[stage]
    spec = get_spec("softmax_online")
    flush = make_flush("cuda")
    out = []
    for dtype in dtypes:
        for shape in shapes:
            runs = runners(Problem(spec, dtype, shape), cfgs)
            rounds = []
            for _ in range(3):
                t = gpu_times(runs, flush, budget_s=0.25)
                rounds.append({c: [round(v.median_us, 3), round(v.p10_us, 3), v.reps] for c, v in t.items()})
            rec = {"op": "softmax_online", "dtype": dtype, "shape": list(shape), "configs": cfgs,
                   "median_p10_reps": rounds}
            print(json.dumps(rec), flush=True)
            out.append(rec)
            with open(out_path, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
