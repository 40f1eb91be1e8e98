"""Robustness of the reader and the differ: bad input is a typed error, never a crash, hang or blow-up."""

from __future__ import annotations

import os
import resource
import threading
import time

import pytest

import tir_export
import tir_kernels
from tileport.tileir import BytecodeError, diff, read_module
from tileport.tileir.attrs import DivBy
from tileport.tileir.model import Op, walk


# -- the differ: assumptions of a large module ----------------------------------------------------

def _assume_every_result(module, divisor: int):
    """Put an `assume div_by` on the result of every arithmetic op of the entry (users follow it)."""
    f = module.entries[0]
    for block_op in [op for op in walk(f) if op.name in ("addf", "mulf", "subf", "exp", "rsqrt")]:
        v = block_op.results[0]
        users = [op for op in walk(f) if v in op.operands]
        assume = Op("assume", [v], ["value"], attributes={"predicate": DivBy(divisor, None, None)})
        out = assume.add_result(v.type)
        block = block_op.parent
        assume.parent = block
        block.ops.insert(block.ops.index(block_op) + 1, assume)
        for u in users:
            u.operands = [out if x is v else x for x in u.operands]
    return module


def test_assumptions_of_a_large_module_are_compared_fast():
    """Assumed predicates on op results were sorted by the repr of the op (which recurses through
    operands and parent blocks): gigabytes and minutes on real kernels. Now linear."""
    data = tir_export.export(tir_kernels.unrolled, [("float32", 1), ("float32", 1), 1024, 60])
    ref = _assume_every_result(read_module(data), 16)
    gen = _assume_every_result(read_module(data), 8)
    n_assumes = sum(op.name == "assume" for op in walk(ref.entries[0]))
    assert n_assumes > 200
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    report = diff(ref, gen)
    elapsed = time.perf_counter() - start
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    findings = [f for f in report.findings if f.category == "assume" and f.rule == "scalar_div_by"]
    assert sum(f.count for f in findings) >= n_assumes // 2
    assert elapsed < 5.0, f"diff took {elapsed:.1f} s"
    assert grown_mib < 200, f"diff grew the peak RSS by {grown_mib:.0f} MiB"


# -- the reader: corrupt input is refused with a located, typed error -------------------------------

DATA = os.path.join(os.path.dirname(__file__), "data", "cutile_rs")


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    """Section id -> (payload offset, payload length), parsed independently of the reader."""
    pos, out = 12, {}
    while data[pos] & 0x7F:
        head, pos = data[pos], pos + 1
        length, shift = 0, 0
        while True:
            b, pos = data[pos], pos + 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if head & 0x80:
            align, pos = data[pos], pos + 1
            pos += -pos % align
        out[head & 0x7F] = (pos, length)
        pos += length
    return out


@pytest.fixture(scope="module")
def softmax_bc() -> bytes:
    return tir_export.case("softmax")


@pytest.mark.parametrize("tail", [b"\x00", b"GARBAGE", b"\xcb" * 8, b"\x02\x05hello"])
def test_trailing_data_after_the_end_section_is_refused(softmax_bc, tail):
    """tileirdisasm: "end section is not the last section". It used to be accepted silently."""
    with pytest.raises(BytecodeError, match="trailing data after the end section") as info:
        read_module(softmax_bc + tail)
    assert info.value.offset == len(softmax_bc)


def test_cutile_rs_section_padding_is_accepted():
    for name in ("add", "softmax", "gemm"):
        with open(os.path.join(DATA, f"{name}.tileirbc"), "rb") as f:
            assert read_module(f.read()).entries


def _debug_payload(data: bytes) -> tuple[int, int]:
    return _sections(data)[3]


def test_corrupt_debug_attribute_is_refused(softmax_bc):
    """A debug attribute with an unknown tag (or an op location that is no location) was ignored."""
    start, length = _debug_payload(softmax_bc)
    refused = 0
    for pos in range(start, start + length):
        for value in (0x07, 0x7F):
            b = bytearray(softmax_bc)
            if b[pos] == value:
                continue
            b[pos] = value
            try:
                read_module(bytes(b))
            except BytecodeError as e:
                assert e.offset is not None and 0 <= e.offset <= len(b)
                refused += 1
    # Nearly every change of the debug section breaks it; a few land on line/column numbers.
    assert refused > length


def test_debug_location_of_an_op_must_be_a_location(softmax_bc):
    module = read_module(softmax_bc)
    start, _ = _debug_payload(softmax_bc)
    # The op ids follow the per-function offsets: find the first 8-byte id > 0 and point it at a
    # file attribute (the table's first DIFile) instead of a location.
    from tileport.tileir.reader.bytecode import _DebugInfo, _Tables, _sections as sections
    _, secs = sections(softmax_bc)
    info = _DebugInfo(secs[3], _Tables(130400, secs))
    file_id = info._tags.index(2) + 1
    ids = [i for f in info.per_function for i in f]
    first = next(i for i in ids if i)
    needle = first.to_bytes(8, "little")
    pos = softmax_bc.index(needle, start)
    bad = softmax_bc[:pos] + file_id.to_bytes(8, "little") + softmax_bc[pos + 8:]
    with pytest.raises(BytecodeError, match="not a location"):
        read_module(bad)
    assert module.entries[0].body.ops


@pytest.mark.parametrize("cut", [13, 20, 100, -1, -2, -50])
def test_truncated_input_is_a_located_error(softmax_bc, cut):
    data = softmax_bc[:cut]
    with pytest.raises(BytecodeError) as info:
        read_module(data)
    assert info.value.offset is not None and 0 <= info.value.offset <= len(softmax_bc)
    assert f"at byte {info.value.offset}" in str(info.value)


def test_huge_length_and_count_fields_fail_fast(softmax_bc):
    """A section length, table count or list length of 2**60 is refused at once, not looped over."""
    huge = bytes([0x80] * 8 + [0x10])  # a varint of 2**59
    start, _ = _sections(softmax_bc)[1]  # the string table: count first
    cases = [
        softmax_bc[:13] + huge + softmax_bc[14:],                      # function section length
        softmax_bc[:start] + huge + softmax_bc[start + 1:],            # string count
        softmax_bc[:13] + bytes([0xFF] * 12) + softmax_bc[25:],        # a varint longer than 64 bits
    ]
    for data in cases:
        t0 = time.perf_counter()
        with pytest.raises(BytecodeError):
            read_module(data)
        assert time.perf_counter() - t0 < 1.0


def _read_in_thread(path, timeout=10.0):
    """read_module(path) in a thread; ('hang', None) if it does not return within `timeout`."""
    result = {}

    def run():
        try:
            read_module(path)
            result["r"] = ("ok", None)
        except BaseException as e:  # noqa: BLE001 - the test looks at what was raised
            result["r"] = ("raised", e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return result.get("r", ("hang", None))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_without_reading():
    kind, err = _read_in_thread("/dev/zero")
    assert kind == "raised" and isinstance(err, BytecodeError), (kind, err)
    assert "character device" in str(err)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "k.tileirbc"
    os.mkfifo(fifo)
    kind, err = _read_in_thread(fifo, timeout=5.0)
    if kind == "hang":  # unblock the reader thread so the test process can end
        with open(fifo, "wb"):
            pass
    assert kind == "raised" and isinstance(err, BytecodeError), (kind, err)
    assert "FIFO" in str(err)


def test_directory_and_oversized_input(tmp_path, monkeypatch):
    with pytest.raises(BytecodeError, match="is a directory"):
        read_module(tmp_path)
    from tileport.tileir import reader
    monkeypatch.setattr(reader, "MAX_BYTES", 64)
    big = tmp_path / "big.tileirbc"
    big.write_bytes(b"\x7fTileIR\x00" + bytes(100))
    with pytest.raises(BytecodeError, match="larger than 64 bytes"):
        read_module(big)


# -- types tileirdisasm refuses are refused, not read into a model the diff would trust -----------

def _type_items(data: bytes):
    from tileport.tileir.reader.bytecode import _SEC_TYPE, _sections as sections, _table
    _, secs = sections(data)
    return _table(secs[_SEC_TYPE], 4, "type table")


def _patch_type(data: bytes, tag: int, old: bytes, new: bytes) -> bytes:
    """Replace `old` by `new` inside the first type item with this tag that contains it."""
    for base, item in _type_items(data):
        if item[0] == tag and old in item:
            i = base + item.index(old)
            return data[:i] + new + data[i + len(old):]
    raise LookupError(f"no type with tag {tag:#x} holds {old.hex()}")


def test_tile_dims_must_be_powers_of_two(softmax_bc):
    bad = _patch_type(softmax_bc, 0x0D, (1024).to_bytes(8, "little"), (1000).to_bytes(8, "little"))
    with pytest.raises(BytecodeError, match=r"tile shape \[1, 1000\]: dimensions must be positive powers of two"):
        read_module(bad)
    negative = _patch_type(softmax_bc, 0x0D, (1024).to_bytes(8, "little"), (-1024).to_bytes(8, "little", signed=True))
    with pytest.raises(BytecodeError, match="positive powers of two"):
        read_module(negative)


def test_dim_map_must_name_a_dimension_of_the_view(softmax_bc):
    # partition_view: tile (1, 1024) as i32s, then the tensor_view id, then dim_map [0, 1].
    bad = _patch_type(softmax_bc, 0x0F, b"\x02\x00\x00\x00\x00\x01\x00\x00\x00",
                      b"\x02\x00\x00\x00\x00\x07\x00\x00\x00")
    with pytest.raises(BytecodeError, match=r"dim_map \[0, 7\] names a dimension outside the 2"):
        read_module(bad)


def test_tensor_view_strides_must_be_positive(softmax_bc):
    one, zero = (1).to_bytes(8, "little"), (0).to_bytes(8, "little")
    bad = _patch_type(softmax_bc, 0x0E, one, zero)
    with pytest.raises(BytecodeError, match="must be dynamic or strictly positive"):
        read_module(bad)


def test_integer_attribute_must_fit_its_type(softmax_bc):
    """An integer attribute wider than its type was masked to the width (a silently changed value)."""
    from tileport.tileir.reader.bytecode import _sections as sections, _Tables
    from tileport.tileir.reader.stream import Cursor
    from tileport.tileir.types import ScalarType
    _, secs = sections(softmax_bc)
    tables = _Tables(130400, secs)
    i32 = next(i for i in range(len(tables._type_items))
               if tables.type(Cursor(bytes([i]), "t")) == ScalarType("i32"))
    ok = tables.tagged(Cursor(bytes([0x01, i32, 0x7F]), "attr"))
    assert ok.value == 127
    too_wide = bytes([0x01, i32]) + bytes([0x80, 0x80, 0x80, 0x80, 0x10])  # 2**32
    with pytest.raises(BytecodeError, match="integer value 4294967296 does not fit in 32 bits"):
        tables.tagged(Cursor(too_wide, "attr"))


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX only")
def test_irdiff_refuses_devices_and_fifos(tmp_path, capsys):
    """`tileport irdiff /dev/zero x` read until memory ran out; a FIFO blocked forever."""
    from tileport.tileir.cli import irdiff
    good = tmp_path / "k.tileirbc"
    good.write_bytes(tir_export.case("vec_add"))
    fifo = tmp_path / "pipe.tileirbc"
    os.mkfifo(fifo)
    for bad, kind in (("/dev/zero", "character device"), (fifo, "FIFO")):
        result = {}
        t = threading.Thread(target=lambda: result.update(rc=irdiff(good, bad)), daemon=True)
        t.start()
        t.join(10)
        if t.is_alive() and bad == fifo:
            with open(fifo, "wb"):
                pass
        assert result.get("rc") == 1, f"irdiff on {bad}: {result or 'no answer within 10 s'}"
        assert kind in " ".join(capsys.readouterr().out.split())  # the console may wrap lines


def test_assume_predicate_flags_with_unknown_bits_are_refused():
    """`bounded`/`div_by` flags are a byte with two bits; 0xAA used to read as "upper bound only"
    (tileirdisasm reads the word as a varint and goes out of step)."""
    data = tir_export.case("rs_add")
    module = read_module(data)
    assert any(op.name == "assume" and type(op.attributes["predicate"]).__name__ == "Bounded"
               for op in walk(module.entries[0]))
    tag = bytes([0x0C, 0x01])  # bounded, lower bound present
    pos = data.index(tag, _sections(data)[2][0]) + 1
    bad = data[:pos] + b"\xaa" + data[pos + 1:]
    with pytest.raises(BytecodeError, match="bounded flags 0xaa set unknown bits") as info:
        read_module(bad)
    assert info.value.offset == pos
