"""Launch specs: the concrete launches of a kernel (grid, argument dtypes / shapes / strides, scalar and
constant values), recorded from the user's own program (`tileport record`) or inferred from the kernel
file's own host code, and used for reference IR, GPU differential tests and benchmarks.

A spec file is JSON (the schema is `SPEC_SCHEMA`, documented in docs/pipeline.md, "Launch specs"):

    {"format": "tileport-launches", "version": 1,
     "launches": [{"framework": "cutile", "kernel": "scale", "qualname": "scale", "file": "/abs/k.py",
                   "grid": [4, 1, 1], "origin": "recorded", "where": "", "count": 3,
                   "args": [{"name": "x", "kind": "array", "dtype": "float16", "shape": [1024],
                             "strides": [1], "range": null},
                            {"name": "alpha", "kind": "scalar", "dtype": "float32", "value": 2.0},
                            {"name": "TILE", "kind": "const", "value": 256}]}]}

`kind` is array | scalar | const | other (a value tileport cannot replay, e.g. a tuple of arrays); an
array passed as a Triton host-side tensor descriptor (`TensorDescriptor`) has the descriptor's shape and
strides and `"descriptor": {"block_shape": [...], "padding": "zero" | "nan"}`;
`range` is [min, max] of an integer array's values when recorded (inputs are drawn in it); `where`
is the file:line:col of an inferred launch site. `framework` is cutile or triton; a Triton launch may
carry `options` (launch options that are not kernel arguments: num_warps, num_stages, ...), and its
`tl.constexpr` parameters are `const` entries. Identical launches are one record with a `count`
(launches that differ only in the values of their integer arrays are identical: their ranges merge).
A recorded spec may carry `dropped`: per kernel, what the recording did not keep over its caps, counted
(`Dropped`, `tileport.launches.bounds`). `LaunchRecord.specialization` says which launches run one
compiled kernel.

Launches inferred from a file's host code: `tileport.launches.infer`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tileport.capture.signature import Capture

FORMAT = "tileport-launches"
VERSION = 1
KINDS = ("array", "scalar", "const", "other")
FRAMEWORKS = ("cutile", "triton")  # launch hooks exist for these (tileport.launches.record)

SPEC_SCHEMA = {
    "type": "object",
    "required": ["format", "version", "launches"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "launches": {"type": "array", "items": {
            "type": "object",
            "required": ["framework", "kernel", "file", "grid", "args"],
            "properties": {
                "framework": {"type": "string"},
                "kernel": {"type": "string", "minLength": 1},
                "qualname": {"type": "string"},
                "file": {"type": "string"},
                "grid": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer", "minimum": 1}},
                "origin": {"enum": ["recorded", "inferred", "config"]},
                "where": {"type": "string"},
                "count": {"type": "integer", "minimum": 1},
                "options": {"type": "object"},
                "args": {"type": "array", "items": {
                    "type": "object", "required": ["name", "kind"],
                    "properties": {
                        "name": {"type": "string"}, "kind": {"enum": list(KINDS)}, "dtype": {"type": "string"},
                        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                        "strides": {"type": "array", "items": {"type": "integer"}},
                        "range": {"type": ["array", "null"]}, "type": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "integer"}},
                        "descriptor": {"type": "object", "required": ["block_shape"], "properties": {
                            "block_shape": {"type": "array", "minItems": 1,
                                            "items": {"type": "integer", "minimum": 1}},
                            "padding": {"enum": ["zero", "nan"]}}}},
                    "allOf": [
                        {"if": {"properties": {"kind": {"const": "array"}}},
                         "then": {"required": ["dtype", "shape", "strides"]}},
                        {"if": {"properties": {"kind": {"const": "scalar"}}}, "then": {"required": ["dtype", "value"]}},
                        {"if": {"properties": {"kind": {"const": "const"}}}, "then": {"required": ["value"]}}]}}}}},
        "dropped": {"type": "array", "items": {
            "type": "object",
            "required": ["framework", "kernel", "file", "specializations", "launches", "extra_launches"],
            "properties": {
                "framework": {"type": "string"}, "kernel": {"type": "string"}, "qualname": {"type": "string"},
                "file": {"type": "string"},
                "specializations": {"type": "array", "items": {"type": "string"}},
                "launches": {"type": "integer", "minimum": 0},
                "extra_launches": {"type": "integer", "minimum": 0}}}},
    },
}

# dtype spellings a spec may use -> the canonical (torch-style) name
DTYPE_NAMES = {
    "float16": "float16", "f16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float32": "float32", "f32": "float32", "float": "float32", "float64": "float64", "f64": "float64",
    "double": "float64", "int8": "int8", "i8": "int8", "int16": "int16", "i16": "int16", "int32": "int32",
    "i32": "int32", "int": "int32", "int64": "int64", "i64": "int64", "long": "int64", "uint8": "uint8", "u8": "uint8",
    "bool": "bool", "bool_": "bool", "tfloat32": "tfloat32", "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}


class LaunchSpecError(ValueError):
    """A spec file that cannot be read or does not follow the schema (says where)."""


@dataclass
class LaunchArg:
    name: str
    kind: str                      # array | scalar | const | other
    dtype: str = ""
    shape: list[int] | None = None
    strides: list[int] | None = None
    range: list | None = None      # [min, max] of an integer array's values, when known
    value: Any = None
    type: str = ""                 # for `other`: what the value was; for `const`: TRITON_DTYPE or ""
    values: list[int] | None = None  # a small integer array's values in memory order, when recorded
    block: list[int] | None = None   # an array passed as a host-side tensor descriptor (Triton): its block shape
    padding: str = ""                # ... and its padding ("zero" / "nan")

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind}
        if self.kind == "array":
            d.update(dtype=self.dtype, shape=list(self.shape or []), strides=list(self.strides or []), range=self.range)
            if self.values is not None:
                d["values"] = list(self.values)
            if self.block is not None:
                d["descriptor"] = {"block_shape": list(self.block), "padding": self.padding or "zero"}
        elif self.kind == "scalar":
            d.update(dtype=self.dtype, value=self.value)
        elif self.kind == "const":
            d["value"] = self.value
            if self.type:
                d["type"] = self.type
        else:
            d["type"] = self.type
        return d


@dataclass
class LaunchRecord:
    framework: str
    kernel: str
    file: str
    grid: tuple[int, int, int]
    args: list[LaunchArg]
    qualname: str = ""
    origin: str = "recorded"
    where: str = ""
    count: int = 1
    options: dict = field(default_factory=dict)  # launch options beside the arguments (Triton: num_warps...)

    def key(self) -> str:
        """Identity of the launch (what runs), independent of how often and where it was seen and of
        the values in its integer arrays (their ranges merge)."""
        what = [self.framework, self.file, self.qualname or self.kernel, list(self.grid),
                [{k: v for k, v in a.to_dict().items() if k not in ("range", "values")} for a in self.args]]
        return json.dumps(what + ([self.options] if self.options else []), sort_keys=True, default=str)

    def kernel_id(self) -> str:
        """The kernel launched (framework, file, qualname)."""
        return json.dumps([self.framework, self.file, self.qualname or self.kernel])

    def specialization(self) -> str:
        """Identity of the compiled kernel this launch runs: what the framework specializes on, not the
        grid or the extents and strides themselves (docs/pipeline.md, "What is a specialization")."""
        args = [_arg_specialization(a, self.framework) for a in self.args]
        return json.dumps([self.framework, self.file, self.qualname or self.kernel, args, self.options],
                          sort_keys=True, default=str)

    def to_dict(self) -> dict:
        d = {"framework": self.framework, "kernel": self.kernel, "qualname": self.qualname or self.kernel,
             "file": self.file, "grid": list(self.grid), "origin": self.origin, "where": self.where,
             "count": self.count, "args": [a.to_dict() for a in self.args]}
        if self.options:
            d["options"] = dict(self.options)
        return d

    @property
    def label(self) -> str:
        arrays = ",".join(f"{a.name}:{a.dtype}{list(a.shape or [])}" for a in self.args if a.kind == "array")
        consts = ",".join(f"{a.name}={a.value}" for a in self.args if a.kind == "const")
        return f"{self.kernel} grid={list(self.grid)} {arrays}" + (f" {consts}" if consts else "")


# Bytes per element of the canonical dtypes (a stride divisible by 16 bytes is a specialization).
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
               "uint8": 1, "bool": 1, "tfloat32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _extent_class(n: int) -> str:
    """What cuTile specializes an extent on: 1, or divisible by 16."""
    return "1" if n == 1 else "16k" if n % 16 == 0 else "n"


def _stride_class(s: int, dtype: str) -> str:
    """What a stride specializes on: 1 (contiguous), 0 (broadcast), negative, or a multiple of 16 bytes."""
    per_16_bytes = max(16 // DTYPE_BYTES.get(dtype, 1), 1)
    return "1" if s == 1 else "0" if s == 0 else "neg" if s < 0 else "16B" if s % per_16_bytes == 0 else "n"


def _int_class(value: Any) -> str:
    """What Triton specializes an integer argument on: == 1, or divisible by 16."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "n"
    return "1" if value == 1 else "16k" if value % 16 == 0 else "n"


def _arg_specialization(a: LaunchArg, framework: str) -> list:
    if a.kind == "array":
        shape, strides = list(a.shape or []), list(a.strides or [])
        return [a.name, a.kind, a.dtype, [_extent_class(n) for n in shape],
                [_stride_class(s, a.dtype) for s in strides], a.block, a.padding]
    if a.kind == "scalar":
        ints = framework == "triton" and a.dtype.startswith(("int", "uint"))
        return [a.name, a.kind, a.dtype] + ([_int_class(a.value)] if ints else [])
    if a.kind == "const":
        return [a.name, a.kind, a.value, a.type]
    return [a.name, a.kind, a.type]


@dataclass
class Dropped:
    """What a recording did not keep of one kernel (the caps of `tileport.launches.bounds`), counted:
    digests of the specializations beyond the per-kernel cap and their launches, and the launches of kept
    specializations beyond the per-specialization cap (other grids or extents)."""
    framework: str
    kernel: str
    file: str
    qualname: str = ""
    specializations: list[str] = field(default_factory=list)
    launches: int = 0
    extra_launches: int = 0

    def kernel_id(self) -> str:
        return json.dumps([self.framework, self.file, self.qualname or self.kernel])

    def to_dict(self) -> dict:
        return {"framework": self.framework, "kernel": self.kernel, "qualname": self.qualname or self.kernel,
                "file": self.file, "specializations": list(self.specializations), "launches": self.launches,
                "extra_launches": self.extra_launches}


def dropped_from_dict(d: dict) -> Dropped:
    return Dropped(d["framework"], d["kernel"], d["file"], d.get("qualname", d["kernel"]),
                   [str(x) for x in d["specializations"]], int(d["launches"]), int(d["extra_launches"]))


def canonical_dtype(name: str) -> str:
    name = str(name).removeprefix("torch.").removeprefix("np.").removeprefix("numpy.").removeprefix("ct.")
    if name not in DTYPE_NAMES:
        raise LaunchSpecError(f"unknown dtype {name!r}")
    return DTYPE_NAMES[name]


def grid3(grid: Iterable[int]) -> tuple[int, int, int]:
    g = [int(x) for x in grid]
    if not 1 <= len(g) <= 3 or any(x < 1 for x in g):
        raise LaunchSpecError(f"bad grid {g}: 1 to 3 positive extents")
    return tuple(g + [1] * (3 - len(g)))  # type: ignore[return-value]


# ------------------------------------------------------------------------------------ reading / writing

# The repr spelling of Triton dtypes (`triton.language.float32`) that specs written by recorders before
# `record.const_value` hold, by the name Triton gives them (str(tl.float32) == "fp32").
TRITON_DTYPE_REPRS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
                      "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "float8e4b15": "fp8e4b15"}


TRITON_DTYPE = "triton.dtype"  # the `type` of a const that is a Triton dtype (its value: the name Triton gives it)


def const_from_spec(value: Any, type_: str, framework: str) -> tuple[Any, str]:
    """(value, type) of a spec's const; a Triton dtype in the repr spelling becomes its name, typed."""
    if framework == "triton" and isinstance(value, str) and value.startswith("triton.language."):
        short = value.removeprefix("triton.language.")
        return TRITON_DTYPE_REPRS.get(short, short), TRITON_DTYPE
    return value, type_


def record_from_dict(d: dict) -> LaunchRecord:
    args = []
    framework = d.get("framework", "cutile")
    for a in d["args"]:
        kind = a["kind"]
        value, type_ = a.get("value"), a.get("type", "")
        if kind == "const":
            value, type_ = const_from_spec(value, type_, framework)
        desc = a.get("descriptor") if kind == "array" else None
        args.append(LaunchArg(a["name"], kind, canonical_dtype(a["dtype"]) if a.get("dtype") else "",
                              [int(x) for x in a["shape"]] if kind == "array" else None,
                              [int(x) for x in a["strides"]] if kind == "array" else None,
                              a.get("range"), value, type_, a.get("values"),
                              [int(x) for x in desc["block_shape"]] if desc else None,
                              desc.get("padding", "zero") if desc else ""))
    return LaunchRecord(framework, d["kernel"], d["file"], grid3(d["grid"]), args,
                        d.get("qualname", d["kernel"]), d.get("origin", "recorded"), d.get("where", ""),
                        int(d.get("count", 1)), dict(d.get("options") or {}))


def parse_spec(data: Any, source: str = "<spec>") -> list[LaunchRecord]:
    import jsonschema
    try:
        jsonschema.validate(data, SPEC_SCHEMA)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "top level"
        raise LaunchSpecError(f"{source}: at {where}: {e.message}") from None
    out = []
    for i, d in enumerate(data["launches"]):
        try:
            rec = record_from_dict(d)
        except LaunchSpecError as e:
            raise LaunchSpecError(f"{source}: launches/{i}: {e}") from None
        for a in rec.args:
            if a.kind == "array" and len(a.shape or []) != len(a.strides or []):
                raise LaunchSpecError(f"{source}: launches/{i}: array `{a.name}` has {len(a.shape or [])} extents "
                                      f"and {len(a.strides or [])} strides")
            if a.block is not None and len(a.block) != len(a.shape or []):
                raise LaunchSpecError(f"{source}: launches/{i}: descriptor `{a.name}` has a block shape of rank "
                                      f"{len(a.block)} over an array of rank {len(a.shape or [])}")
        out.append(rec)
    return out


def load_spec(path: str | Path) -> list[LaunchRecord]:
    return load_document(path)[0]


def load_document(path: str | Path) -> tuple[list[LaunchRecord], list[Dropped]]:
    """The spec's records and what its recording dropped over the caps."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise LaunchSpecError(f"launch spec {path}: {e}") from None
    records = parse_spec(data, str(path))
    return records, [dropped_from_dict(d) for d in data.get("dropped", [])]


def merge(records: Iterable[LaunchRecord]) -> list[LaunchRecord]:
    """Identical launches become one record whose count is the sum (first-seen order kept)."""
    out: dict[str, LaunchRecord] = {}
    for r in records:
        k = r.key()
        if k not in out:
            out[k] = LaunchRecord(**{**r.__dict__, "args": [LaunchArg(**a.__dict__) for a in r.args],
                                     "options": dict(r.options)})
            continue
        absorb(out[k], r)
    return list(out.values())


def absorb(into: LaunchRecord, other: LaunchRecord) -> None:
    """Add `other`, a repeat of the launch `into` (same key), to it: counts add, value ranges merge."""
    into.count += other.count
    for mine, theirs in zip(into.args, other.args):
        mine.range = _union(mine.range, theirs.range)
        if mine.values != theirs.values:  # launches with other tables: only the range is known
            mine.values = None


def _union(a: list | None, b: list | None) -> list | None:
    """The value range covering both (an unknown range stays unknown)."""
    if a is None or b is None:
        return None
    return [min(a[0], b[0]), max(a[1], b[1])]


def spec_document(records: Iterable[LaunchRecord], dropped: Iterable[Dropped] = ()) -> dict:
    doc = {"format": FORMAT, "version": VERSION, "launches": [r.to_dict() for r in records]}
    dropped = [d.to_dict() for d in dropped]
    if dropped:
        doc["dropped"] = dropped
    return doc


def write_spec(path: str | Path, records: Iterable[LaunchRecord], dropped: Iterable[Dropped] = ()) -> None:
    """Atomic write (a temporary file in the same directory, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(spec_document(records, dropped), f, indent=1, default=str)
    os.replace(tmp, path)


def records_hash(records: Iterable[LaunchRecord]) -> str:
    """Hash of what the launches run (not counts, origins or file locations)."""
    keys = sorted(json.dumps([r.kernel, list(r.grid), [a.to_dict() for a in r.args]], sort_keys=True, default=str)
                  for r in records)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


# ------------------------------------------------------------------------------------ use by the pipeline

def for_kernel(records: Iterable[LaunchRecord], path: Path, kernel: str) -> list[LaunchRecord]:
    """The records of `kernel` of the file `path` (matched by kernel name and file name: a spec
    recorded on another machine names the file by that machine's path)."""
    name = Path(path).name
    return [r for r in records if r.kernel == kernel and Path(r.file).name == name]


def fit_problems(record: LaunchRecord, params: list[dict]) -> list[str]:
    """Why `record` does not fit the kernel's parameters (stage A's records {name, kind, rank})."""
    problems = []
    names = [p["name"] for p in params]
    got = [a.name for a in record.args]
    if got != names:
        return [f"{record.label}: arguments {got} vs kernel parameters {names}"]
    for p, a in zip(params, record.args):
        if a.kind == "other":
            problems.append(f"`{a.name}`: a {a.type or 'value'} cannot be replayed (only arrays, scalars, constants)")
        elif p["kind"] != a.kind:
            problems.append(f"`{a.name}`: the kernel takes a {p['kind']}, the launch passes a {a.kind}")
        elif a.kind == "array" and p.get("rank") is not None and p["rank"] != len(a.shape or []):
            problems.append(f"`{a.name}`: rank {len(a.shape or [])} vs the kernel's rank {p['rank']}")
    return problems


def descriptor_fields(record: LaunchRecord) -> dict[str, Any]:
    """A host-side tensor descriptor's block shape and padding, under the keys the Triton frontend reads
    (`PARAM.block_shape`, `PARAM.padding`: tileport.frontends.triton.descriptors)."""
    out: dict[str, Any] = {}
    for a in record.args:
        if a.block is not None:
            out[f"{a.name}.block_shape"] = tuple(a.block)
            out[f"{a.name}.padding"] = a.padding or "zero"
    return out


def captures(records: Iterable[LaunchRecord]):
    """The distinct signatures (dtypes, ranks, scalar dtypes, constant values) of the records, as
    `Capture`s for the reference IR (one per specialization, first-seen order)."""
    out: dict[str, Capture] = {}
    for r in records:
        arrays = {a.name: (a.dtype, len(a.shape or [])) for a in r.args if a.kind == "array"}
        scalars = {a.name: a.dtype for a in r.args if a.kind == "scalar"}
        consts = {a.name: a.value for a in r.args if a.kind == "const"}
        consts.update(descriptor_fields(r))
        c = Capture(r.kernel, arrays, scalars, consts)
        out.setdefault(json.dumps([sorted(arrays.items()), sorted(scalars.items()), sorted(consts.items())],
                                  default=str), c)
    return list(out.values())


__all__ = ["Dropped", "LaunchArg", "LaunchRecord", "LaunchSpecError", "SPEC_SCHEMA", "load_document", "load_spec",
           "parse_spec", "write_spec",
           "merge", "for_kernel", "fit_problems", "captures", "records_hash", "canonical_dtype", "spec_document"]
