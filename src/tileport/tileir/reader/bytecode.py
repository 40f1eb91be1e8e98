"""Pure-Python Tile IR bytecode reader (versions 13.1 to 13.5).

Layout facts (cuda-tile `BytecodeReader.cpp` / cuTile Python `writer.py`, see
docs/tileir.md): an 8-byte magic, version bytes, then sections `id|0x80?, varint length,
[varint alignment, 0xCB padding], payload` until id 0. Tables (strings, types, constants, debug
attributes) are `varint count, padding, fixed-width offsets, data`. Op bodies follow the per-op
schemas of `schemas.py`.

Value numbering follows the writer: function parameters are 0..n-1, each op's results take the next
ids; a region's block arguments and inner values are numbered from the counter as it was before the
op, the counter is reset after the region, and the op's own results come after that.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from ..attrs import (Bounded, Dense, DictAttr, DivBy, Hints, PreviewArg, SameElements, TypedFloat,
                     TypedInt)
from ..model import Block, Function, Global, Module, Op, Region, Value
from ..types import (FunctionType, GatherScatterViewType, PartitionViewType, PointerType,
                     ScalarType, StridedViewType, TensorViewType, TileType, TokenType, Type)
from .schemas import ALL_FALSE, OpSchema, Schemas, Step, load_schemas
from .stream import BytecodeError, Cursor

MAGIC = b"\x7fTileIR\x00"
SUPPORTED = ((13, 1), (13, 2), (13, 3), (13, 4), (13, 5))

_SEC_END, _SEC_STRING, _SEC_FUNC, _SEC_DEBUG, _SEC_CONST, _SEC_TYPE, _SEC_GLOBAL, _SEC_PRODUCER = range(8)

_SIMPLE_TYPES = {0x00: "i1", 0x01: "i8", 0x02: "i16", 0x03: "i32", 0x04: "i64", 0x05: "f16",
                 0x06: "bf16", 0x07: "f32", 0x08: "tf32", 0x09: "f64", 0x0A: "f8E4M3FN",
                 0x0B: "f8E5M2", 0x12: "f8E8M0FNU", 0x13: "f4E2M1FN", 0x16: "i4", 130: "f8E5M3FNU"}
_TOKEN_TAG, _PTR, _TILE, _TVIEW, _PVIEW, _FUNC, _GSVIEW, _SVIEW = 0x11, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x14, 0x15
_PADDING = {0: "zero", 1: "neg_zero", 2: "nan", 3: "pos_inf", 4: "neg_inf"}


def _tile_shape(c: Cursor, dims: tuple, what: str) -> tuple[int, ...]:
    """Tile dimensions are static powers of two (tileirdisasm refuses anything else)."""
    for d in dims:
        if d is None or d <= 0 or d & (d - 1):
            raise c.fail(f"{what} {list(dims)}: dimensions must be positive powers of two")
    return dims  # type: ignore[return-value]


def _view_dims(c: Cursor, dims: tuple, what: str) -> tuple:
    """tensor_view sizes and strides: dynamic (None) or strictly positive."""
    if any(d is not None and d <= 0 for d in dims):
        raise c.fail(f"tensor_view {what} {list(dims)} must be dynamic or strictly positive")
    return dims


def _dim_map(c: Cursor, dim_map: tuple, tv: TensorViewType) -> tuple:
    rank = len(tv.shape)
    if any(d is None or not 0 <= d < rank for d in dim_map):
        raise c.fail(f"dim_map {list(dim_map)} names a dimension outside the {rank} of its tensor_view")
    return dim_map


def _flags(c: Cursor, known: int, what: str) -> int:
    """A flags byte; bits the writer never sets are corruption (a reader taking the byte as a varint,
    as tileirdisasm does, would go out of step)."""
    b = c.byte()
    if b & ~known:
        c.pos -= 1  # point at the byte
        raise c.fail(f"{what} flags {b:#04x} set unknown bits")
    return b


def _padding(c: Cursor) -> str:
    b = c.byte()
    if b not in _PADDING:
        raise c.fail(f"unknown padding value {b}")
    return _PADDING[b]

_V13_3, _V13_4, _V13_5 = 130300, 130400, 130500
# Operand roles that may hold tokens: token inputs, and the variadic values of control flow.
_TOKEN_ROLES = frozenset({"token", "tokens", "initValues", "operands", "args"})


class _Tables:
    """String, type and constant tables plus the decoding context shared by all functions."""

    def __init__(self, version: int, sections: dict[int, _Section]):
        self.version = version
        self.strings = [item.decode("utf-8", "replace") for _, item in
                        _table(sections.get(_SEC_STRING), 4, "string table")]
        self._type_items = _table(sections.get(_SEC_TYPE), 4, "type table")
        self._types: dict[int, Type] = {}
        self._decoding: set[int] = set()  # type ids being decoded (a type may not contain itself)
        self.constants = [_constant_item(base, item) for base, item in
                          _table(sections.get(_SEC_CONST), 8, "constant table")]

    def string(self, c: Cursor) -> str:
        """The string whose id `c` reads next."""
        sid = c.varint()
        if sid >= len(self.strings):
            raise c.fail(f"string id {sid} out of range ({len(self.strings)} strings)")
        return self.strings[sid]

    def constant(self, c: Cursor) -> bytes:
        cid = c.varint()
        if cid >= len(self.constants):
            raise c.fail(f"constant id {cid} out of range ({len(self.constants)} constants)")
        return self.constants[cid]

    def type(self, c: Cursor) -> Type:
        """The type whose id `c` reads next (decoded once, on first use)."""
        tid = c.varint()
        t = self._types.get(tid)
        if t is None:
            if tid >= len(self._type_items):
                raise c.fail(f"type id {tid} out of range ({len(self._type_items)} types)")
            if tid in self._decoding:
                raise c.fail(f"type #{tid} contains itself")
            self._decoding.add(tid)
            base, item = self._type_items[tid]
            item_cursor = Cursor(item, f"type #{tid}", base=base)
            t = self._decode_type(item_cursor)
            item_cursor.expect_end()
            self._decoding.discard(tid)
            self._types[tid] = t
        return t

    def _scalar(self, c: Cursor) -> ScalarType:
        t = self.type(c)
        if not isinstance(t, ScalarType):
            raise c.fail(f"type {t} is not a scalar type")
        return t

    def _tensor_view(self, c: Cursor) -> TensorViewType:
        t = self.type(c)
        if not isinstance(t, TensorViewType):
            raise c.fail(f"type {t} is not a tensor_view")
        return t

    def _decode_type(self, c: Cursor) -> Type:
        tag = c.varint()
        v = self.version
        if tag in _SIMPLE_TYPES:
            return ScalarType(_SIMPLE_TYPES[tag])
        if tag == _TOKEN_TAG:
            return TokenType()
        if tag == _PTR:
            flags = c.varint() if v >= _V13_4 else 0
            pointee = self._scalar(c)
            return PointerType(pointee, c.byte() if flags & 1 else None)
        if tag == _TILE:
            elem = self.type(c)
            if not isinstance(elem, (ScalarType, PointerType)):
                raise c.fail(f"tile element {elem} is not a scalar or pointer")
            return TileType(_tile_shape(c, c.int_list(8), "tile shape"), elem)  # type: ignore[arg-type]
        if tag == _TVIEW:
            flags = c.varint() if v >= _V13_4 else 0
            elem = self._scalar(c)
            shape, strides = _view_dims(c, c.int_list(8), "sizes"), _view_dims(c, c.int_list(8), "strides")
            if len(shape) != len(strides):
                raise c.fail(f"tensor_view has {len(shape)} sizes but {len(strides)} strides")
            return TensorViewType(elem, shape, strides, c.byte() if flags & 1 else None)
        if tag == _PVIEW:
            flags = c.varint() if v >= _V13_3 else None
            tile, tv = _tile_shape(c, c.int_list(4), "partition tile"), self._tensor_view(c)
            dim_map = _dim_map(c, c.int_list(4), tv)
            # Before 13.3 a has-padding flag follows the dim map instead of leading flags.
            has_padding = flags & 1 if flags is not None else c.varint()
            padding = _padding(c) if has_padding else None
            return PartitionViewType(tile, tv, dim_map, padding)  # type: ignore[arg-type]
        if tag == _FUNC:
            params = tuple(self.type(c) for _ in range(c.count("parameter")))
            results = tuple(self.type(c) for _ in range(c.count("result")))
            return FunctionType(params, results)
        if tag == _GSVIEW:
            flags = c.varint()
            tile, tv, sparse = _tile_shape(c, c.int_list(4), "view tile"), self._tensor_view(c), c.varint()
            if sparse >= len(tv.shape):
                raise c.fail(f"sparse dimension {sparse} is outside the {len(tv.shape)} tensor_view dimensions")
            return GatherScatterViewType(tile, tv, sparse,  # type: ignore[arg-type]
                                         _padding(c) if flags & 1 else None)
        if tag == _SVIEW:
            flags = c.varint()
            tile, trav = _tile_shape(c, c.int_list(4), "view tile"), c.int_list(4)
            tv = self._tensor_view(c)
            dim_map = _dim_map(c, c.int_list(4), tv)
            return StridedViewType(tile, trav, tv, dim_map,  # type: ignore[arg-type]
                                   _padding(c) if flags & 1 else None)
        raise c.fail(f"unknown type tag {tag:#x}")

    # -- attributes ------------------------------------------------------------------------------

    def tagged(self, c: Cursor) -> Any:
        tag = c.varint()
        if tag == 0x01:  # Integer: type id + value masked to the type's width
            t = self._scalar(c)
            raw = c.varint()
            if raw >> t.bits:
                raise c.fail(f"integer value {raw} does not fit in {t.bits} bits")
            signed = raw - (1 << t.bits) if t.bits > 1 and raw >> (t.bits - 1) else raw
            return TypedInt(t, signed)
        if tag == 0x02:  # Float: type id + bits (a byte up to 8 bits, else a signed varint)
            t = self._scalar(c)
            bits = c.byte() if t.bits <= 8 else c.signed_varint()
            return TypedFloat(t, bits & ((1 << t.bits) - 1))
        if tag == 0x03:
            return bool(c.byte())
        if tag == 0x04:
            return self.type(c)
        if tag == 0x05:
            return self.string(c)
        if tag == 0x06:
            return tuple(self.tagged(c) for _ in range(c.count("array")))
        if tag == 0x07:  # DenseElements: type id + constant id
            t = self.type(c)
            return Dense(t, self.constant(c))
        if tag == 0x08:
            divisor, flags = c.varint(), _flags(c, 0b11, "div_by")
            every = c.signed_varint() if flags & 1 else None
            along = c.signed_varint() if flags & 2 else None
            return DivBy(divisor, every, along)
        if tag == 0x09:
            return SameElements(tuple(v for v in c.int_list(8) if v is not None))
        if tag == 0x0A:
            return self.dictionary(c)
        if tag == 0x0B:
            return self.hints(c)
        if tag == 0x0C:
            flags = _flags(c, 0b11, "bounded")
            lb = c.signed_varint() if flags & 1 else None
            ub = c.signed_varint() if flags & 2 else None
            return Bounded(lb, ub)
        if tag == 0xD1:  # public-preview symbolic integer
            return PreviewArg(tag, c.signed_varint())
        if tag == 0xDB:  # public-preview datatype
            return PreviewArg(tag, self.type(c))
        if tag == 0xE4:  # public-preview string
            return PreviewArg(tag, self.string(c))
        raise c.fail(f"unknown attribute tag {tag:#x}")

    def dictionary(self, c: Cursor) -> DictAttr:
        return DictAttr(tuple((self.string(c), self.tagged(c)) for _ in range(c.count("dictionary", 2))))

    def hints(self, c: Cursor) -> Hints:
        """An untagged dictionary: architecture key -> tagged Dictionary of hints."""
        items = []
        for _ in range(c.count("hints", 2)):
            arch = self.string(c)
            d = self.tagged(c)
            if not isinstance(d, DictAttr):
                raise c.fail(f"optimization hints for {arch!r} are not a dictionary")
            items.append((arch, d))
        return Hints(tuple(items))


class _Section(NamedTuple):
    offset: int      # of the payload in the input
    payload: bytes


def _table(section: _Section | None, width: int, what: str) -> list[tuple[int, bytes]]:
    """Items of a table section as (offset in the input, bytes)."""
    if section is None or not section.payload:
        return []
    payload = section.payload
    c = Cursor(payload, what, base=section.offset)
    n = c.count("item", width)
    c.align(width)
    offsets = [c.uint(width) for _ in range(n)]
    start = c.pos
    size = len(payload) - start
    ends = offsets[1:] + [size]
    for i, (o, e) in enumerate(zip(offsets, ends)):
        if o > e or e > size:
            raise BytecodeError(f"{what} at byte {section.offset + start}: item {i} spans bytes "
                                f"{o}..{e} of a {size}-byte data area", section.offset + start)
    return [(section.offset + start + o, payload[start + o:start + e]) for o, e in zip(offsets, ends)]


def _constant_item(base: int, item: bytes) -> bytes:
    c = Cursor(item, "constant", base=base)
    value = c.take(c.varint())
    c.expect_end()
    return value


_KNOWN_SECTIONS = frozenset(range(1, 8))


def _sections(data: bytes) -> tuple[tuple[int, int, int], dict[int, _Section]]:
    c = Cursor(data, "header")
    if c.take(8) != MAGIC:
        raise BytecodeError("not Tile IR bytecode (bad magic)", 0)
    major, minor, tag = c.byte(), c.byte(), c.uint(2)
    if (major, minor) not in SUPPORTED:
        raise BytecodeError(f"unsupported bytecode version {major}.{minor} "
                            f"(this reader reads 13.1 to 13.5)", 8)
    sections: dict[int, _Section] = {}
    c.what = "section header"
    while True:
        head = c.byte()
        sid = head & 0x7F
        if sid == _SEC_END:
            break
        if sid not in _KNOWN_SECTIONS:
            raise c.fail(f"unknown section id {sid}")
        length = c.varint()
        if head & 0x80:
            c.align(c.varint())
        if sid in sections:
            raise c.fail(f"duplicate section {sid}")
        sections[sid] = _Section(c.pos, c.take(length))
    if not c.at_end:  # tileirdisasm: "end section is not the last section"
        raise c.fail(f"{c.end - c.pos} byte(s) of trailing data after the end section")
    return (major, minor, tag), sections


# Debug attribute tags (cuTile Python `DebugTag`) and what their fields are: `s` a string id,
# `n` a number, a tag set the kinds of attribute an id field may refer to (0: none).
_DI_UNKNOWN, _DI_COMPILE_UNIT, _DI_FILE, _DI_BLOCK, _DI_LOC, _DI_SUBPROGRAM, _DI_CALL_SITE = range(7)
_SCOPES = frozenset({_DI_BLOCK, _DI_SUBPROGRAM})
_LOCATIONS = frozenset({_DI_LOC, _DI_CALL_SITE})
_DI_FIELDS: dict[int, tuple] = {
    _DI_UNKNOWN: (),
    _DI_COMPILE_UNIT: (frozenset({_DI_FILE}),),
    _DI_FILE: ("s", "s"),
    _DI_BLOCK: (_SCOPES, frozenset({_DI_FILE}), "n", "n"),
    _DI_LOC: (_SCOPES, "s", "n", "n"),
    _DI_SUBPROGRAM: (frozenset({_DI_FILE}), "n", "s", "s", frozenset({_DI_COMPILE_UNIT}), "n"),
    _DI_CALL_SITE: (_LOCATIONS, _LOCATIONS),
}


class _DebugInfo:
    """Per-function lists of debug-attribute ids (one per op, after the function's own) and the
    attribute table. Everything is validated as tileirdisasm does (a corrupt debug section is
    refused, not ignored); only locations are kept: the diff never compares debug info, it only
    uses it to point findings at source lines."""

    def __init__(self, section: _Section | None, tables: _Tables):
        self.per_function: list[list[int]] = []
        self._tags: list[int] = []           # tag per attribute id - 1
        self._locs: list[str | None] = []    # "file:line:col" of DILoc attributes
        self._callee: dict[int, int] = {}    # CallSite attribute id -> its callee's id
        if section is None or not section.payload:
            return
        c = Cursor(section.payload, "debug section", base=section.offset)
        nfuncs = c.count("function", 4)
        c.align(4)
        offsets = [c.uint(4) for _ in range(nfuncs)]
        total = c.count("debug id", 8)
        c.align(8)
        at_ids = c.offset
        ids = [c.uint(8) for _ in range(total)]
        ends = offsets[1:] + [total]
        if any(o > e for o, e in zip(offsets, ends)):
            raise BytecodeError(f"debug section at byte {at_ids}: per-function offsets out of order "
                                f"or beyond the {total} ids", at_ids)
        self.per_function = [ids[o:e] for o, e in zip(offsets, ends)]
        items = _table(_Section(c.offset, section.payload[c.pos:]), 4, "debug attribute table")
        refs = [self._attribute(i + 1, base, item, tables) for i, (base, item) in enumerate(items)]
        for attr_id, base, field_refs in refs:
            for kinds, ref in field_refs:
                if not (ref == 0 or (0 < ref <= len(self._tags) and self._tags[ref - 1] in kinds)):
                    raise BytecodeError(f"debug attribute #{attr_id} at byte {base}: reference to "
                                        f"#{ref} is not a {_kind_names(kinds)}", base)
        for f, per_op in enumerate(self.per_function):
            for ref in per_op:
                if ref != 0 and not (ref <= len(self._tags) and self._tags[ref - 1] in _LOCATIONS):
                    raise BytecodeError(f"debug section at byte {at_ids}: function #{f + 1} has an "
                                        f"operation location #{ref} that is not a location", at_ids)

    def _attribute(self, attr_id: int, base: int, item: bytes,
                   tables: _Tables) -> tuple[int, int, list[tuple[frozenset, int]]]:
        c = Cursor(item, f"debug attribute #{attr_id}", base=base)
        tag = c.byte()
        fields = _DI_FIELDS.get(tag)
        if fields is None:
            raise c.fail(f"unknown debug attribute tag {tag}")
        if tag == _DI_SUBPROGRAM and tables.version >= _V13_5:
            fields = fields + ("n",)  # subprogram flags
        values: list = []
        refs: list[tuple[frozenset, int]] = []
        for field in fields:
            if field == "s":
                values.append(tables.string(c))
            elif field == "n":
                values.append(c.varint())
            else:
                ref = c.varint()
                refs.append((field, ref))
                values.append(ref)
        c.expect_end()
        self._tags.append(tag)
        self._locs.append(f"{os.path.basename(values[1])}:{values[2]}:{values[3]}"
                          if tag == _DI_LOC else None)
        if tag == _DI_CALL_SITE:
            self._callee[attr_id] = values[0]
        return attr_id, base, refs

    def location(self, attr_id: int) -> str | None:
        """The source location of a location attribute (a call site: its innermost callee)."""
        seen = set()
        while attr_id in self._callee and attr_id not in seen:
            seen.add(attr_id)
            attr_id = self._callee[attr_id]
        return self._locs[attr_id - 1] if 0 < attr_id <= len(self._locs) else None

    def function(self, index: int, name: str, c: Cursor) -> list[int]:
        """Debug ids of function `index` (1-based; 0: none)."""
        if index == 0:
            return []
        if index > len(self.per_function):
            raise c.fail(f"function {name}: debug info #{index} does not exist "
                         f"({len(self.per_function)} in the debug section)")
        return self.per_function[index - 1]


def _kind_names(kinds: frozenset) -> str:
    names = {_DI_COMPILE_UNIT: "compile unit", _DI_FILE: "file", _DI_BLOCK: "lexical block",
             _DI_LOC: "location", _DI_SUBPROGRAM: "subprogram", _DI_CALL_SITE: "call site"}
    return " or ".join(sorted(names[k] for k in kinds))


class _FunctionReader:
    def __init__(self, tables: _Tables, schemas: Schemas, locs: list[int], debug: _DebugInfo):
        self.t = tables
        self.schemas = schemas
        self.values: list[Value] = []
        self.locs = locs          # debug attr id per op, in pre-order
        self.debug = debug
        self.op_index = 0

    def block(self, c: Cursor, block: Block, num_ops: int | None) -> None:
        """Read ops into `block`: `num_ops` of them, or until the cursor ends (a function body)."""
        while (not c.at_end) if num_ops is None else len(block.ops) < num_ops:
            block.ops.append(self.op(c, block))

    def op(self, c: Cursor, parent: Block) -> Op:
        opcode = c.varint()
        schema = self.schemas.by_opcode.get(opcode)
        if schema is None:
            raise c.fail(f"unknown opcode {opcode}")
        op = Op(schema.name, parent=parent)
        loc_index = self.op_index
        self.op_index += 1
        if loc_index < len(self.locs):
            op.loc = self.debug.location(self.locs[loc_index])
        has_regions = self._fields(c, schema, op)
        if has_regions:
            mark = len(self.values)
            for _ in range(c.count("region")):
                region = Region()
                for _ in range(c.count("block")):
                    block = Block(parent=op)
                    for _ in range(c.count("block argument")):
                        self.values.append(block.add_arg(self.t.type(c)))
                    self.block(c, block, c.count("operation"))
                    region.blocks.append(block)
                    del self.values[mark:]
                op.regions.append(region)
        self.values.extend(op.results)
        return op

    def _operand(self, c: Cursor) -> Value:
        vid = c.varint()
        if vid >= len(self.values):
            raise c.fail(f"operand %{vid} is not defined ({len(self.values)} values in scope)")
        return self.values[vid]

    def _fields(self, c: Cursor, schema: OpSchema, op: Op) -> bool:
        version = self.t.version
        present: dict[str, bool] = {}
        count_left: int | None = None
        has_regions = False
        all_false: list[str] = []
        steps = schema.steps
        for i, step in enumerate(steps):
            if step.since is not None and version < step.since:
                if step.default == ALL_FALSE:
                    all_false.append(step.name)
                elif step.default is not None:
                    op.attributes[step.name] = step.default
                continue
            if step.cond is not None and not present.get(step.cond, False):
                continue
            kind = step.kind
            if kind == "result":
                op.add_result(self.t.type(c))
            elif kind == "results":
                for _ in range(c.count("result")):
                    op.add_result(self.t.type(c))
            elif kind == "flags":
                mask = c.varint()
                for b in step.bits:
                    on = bool(mask >> b.bit & 1)
                    if b.presence:
                        present[b.param] = on
                    else:
                        op.attributes[b.param] = on
            elif kind == "attr":
                op.attributes[step.name] = self._attr(c, step)
            elif kind == "count":
                count_left = c.count("operand")
            elif kind == "operand":
                count_left = self._operands(c, step, op, present, count_left, steps[i + 1:])
            elif kind == "regions":
                has_regions = True
        for name in all_false:
            op.attributes[name] = (False,) * len(op.operands_with("index"))
        # Bool attributes folded into a flags word that this version does not write are false.
        for step in steps:
            if step.kind == "flags":
                for b in step.bits:
                    if not b.presence:
                        op.attributes.setdefault(b.param, False)
        return has_regions

    def _operands(self, c: Cursor, step: Step, op: Op, present: dict[str, bool],
                  count_left: int | None, rest: tuple[Step, ...]) -> int | None:
        form = step.form
        if form == "sized":
            for _ in range(c.count("operand")):
                self._add_operand(op, step.name, c)
            return count_left
        if count_left is None:
            # No count word: `one` operands are always there, optional ones follow their flag.
            if form == "one" or (form == "optional" and present.get(step.name, False)):
                self._add_operand(op, step.name, c)
            elif form == "unsized":
                raise c.fail(f"{op.name}: variadic operand {step.name} without a count")
            return None
        if form == "one":
            take = 1
        elif form == "optional":
            take = 1 if count_left > 0 else 0
            present[step.name] = bool(take)
        else:  # unsized: whatever the later fixed operands of this count group leave
            later_fixed = 0
            for s in rest:
                if s.kind != "operand" or s.form == "sized":
                    break
                later_fixed += s.form == "one"
            take = count_left - later_fixed
        if take < 0 or take > count_left:
            raise c.fail(f"{op.name}: operand count {count_left} too small")
        for _ in range(take):
            self._add_operand(op, step.name, c)
        return count_left - take

    def _add_operand(self, op: Op, role: str, c: Cursor) -> None:
        v = self._operand(c)
        # Tokens only order memory effects; canonicalization drops them, which is sound only
        # where an operand slot can hold a token.
        if isinstance(v.type, TokenType) and role not in _TOKEN_ROLES:
            raise c.fail(f"{op.name}: a token used as operand '{role}'")
        op.operands.append(v)
        op.operand_roles.append(role)

    def _attr(self, c: Cursor, step: Step) -> Any:
        form = step.form
        if form == "enum":
            b = c.byte()
            members = self.schemas.enums.get(step.enum or "", {})
            if b not in members:
                raise c.fail(f"value {b} is not a member of {step.enum}")
            return members[b]
        if form == "int":
            return c.varint()
        if form == "bool":
            return bool(c.byte())
        if form == "str":
            return self.t.string(c)
        if form == "typeid":
            return self.t.type(c)
        if form == "array":
            return tuple(self.t.tagged(c) for _ in range(c.count("array")))
        if form == "tagged":
            return self.t.tagged(c)
        if form == "dense":
            return Dense(None, self.t.constant(c))
        if form == "i32s":
            return tuple(c.int_list(4))
        if form == "bools":
            return tuple(bool(v) for v in c.int_list(1))
        if form == "hints":
            return self.t.hints(c)
        raise c.fail(f"unknown attribute form {form}")


def _read_functions(section: _Section, tables: _Tables, schemas: Schemas,
                    debug: _DebugInfo) -> list[Function]:
    c = Cursor(section.payload, "function section", base=section.offset)
    out = []
    for _ in range(c.count("function")):
        name = tables.string(c)
        ftype = tables.type(c)
        if not isinstance(ftype, FunctionType):
            raise c.fail(f"function {name}: signature {ftype} is not a function type")
        flags = c.byte()
        is_entry = bool(flags & 0x02)
        locs = debug.function(c.varint(), name, c)
        hints = None
        if is_entry and (flags & 0x04 or tables.version >= _V13_5):
            h = tables.tagged(c)
            if not isinstance(h, Hints):
                raise c.fail(f"function {name}: optimization hints expected")
            hints = h
        if tables.version >= _V13_5:
            tables.tagged(c)  # argument attributes (13.5): an array, unused by the diff
        body_len = c.varint()
        reader = _FunctionReader(tables, schemas, locs[1:], debug)
        body = Block()
        for t in ftype.params:
            reader.values.append(body.add_arg(t))
        at_body = c.offset
        reader.block(c.sub(body_len, f"body of {name}"), body, None)
        if locs and reader.op_index != len(locs) - 1:
            raise BytecodeError(f"body of {name} at byte {at_body}: {reader.op_index} operations, but "
                                f"its debug info has {len(locs) - 1} operation locations", at_body)
        loc = debug.location(locs[0]) if locs else None
        out.append(Function(name, ftype, body, is_entry, hints, bool(flags & 0x01), loc))
    c.expect_end(padding=True)
    return out


def _read_globals(section: _Section, tables: _Tables) -> list[Global]:
    c = Cursor(section.payload, "global section", base=section.offset)
    out = []
    for _ in range(c.count("global", 3)):
        name, gtype = tables.string(c), tables.type(c)
        data, alignment = tables.constant(c), c.varint()
        visibility, constant = "public", False
        if tables.version >= _V13_3:
            visibility = "private" if c.byte() else "public"
            constant = bool(c.varint())
        out.append(Global(name, gtype, data, alignment, constant, visibility))
    c.expect_end(padding=True)
    return out


def read_bytecode(data: bytes) -> Module:
    """Decode Tile IR bytecode into a Module; BytecodeError (with the offset) if it is not valid."""
    try:
        return _read(data)
    except RecursionError:
        raise BytecodeError("attributes or regions nested too deeply") from None


def _read(data: bytes) -> Module:
    (major, minor, tag), sections = _sections(data)
    version = major * 10000 + minor * 100
    tables = _Tables(version, sections)
    debug = _DebugInfo(sections.get(_SEC_DEBUG), tables)
    schemas = load_schemas()
    module = Module(f"{major}.{minor}", preview=bool(tag & 1))
    if _SEC_GLOBAL in sections:
        module.globals = _read_globals(sections[_SEC_GLOBAL], tables)
    if _SEC_FUNC in sections:
        module.functions = _read_functions(sections[_SEC_FUNC], tables, schemas, debug)
    if _SEC_PRODUCER in sections:
        section = sections[_SEC_PRODUCER]
        c = Cursor(section.payload, "producer section", base=section.offset)
        module.producer = tables.string(c)
        c.expect_end(padding=True)
    return module
