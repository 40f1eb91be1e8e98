"""A byte cursor with the bytecode's primitive encodings (LEB128 varints, fixed-width int lists)."""

from __future__ import annotations

INT64_MIN = -(1 << 63)
PADDING_BYTE = 0xCB


class BytecodeError(ValueError):
    """The input is not valid Tile IR bytecode (or uses something this reader does not know).

    `offset` is the byte offset in the input where reading failed, when known."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


class Cursor:
    """Reads `data[pos:end]`; `base` is the offset of `data[0]` in the whole input (for messages)."""

    __slots__ = ("data", "pos", "end", "what", "base")

    def __init__(self, data: bytes, what: str, pos: int = 0, end: int | None = None, base: int = 0):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.what = what
        self.base = base

    @property
    def offset(self) -> int:
        """The current position in the whole input."""
        return self.base + self.pos

    def fail(self, message: str) -> BytecodeError:
        return BytecodeError(f"{self.what} at byte {self.offset}: {message}", self.offset)

    @property
    def at_end(self) -> bool:
        return self.pos >= self.end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise self.fail(f"needs {n} bytes, {self.end - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise self.fail("varint longer than 64 bits")

    def count(self, what: str, min_item_bytes: int = 1) -> int:
        """A varint count of items that take at least `min_item_bytes` each: refused when the bytes
        left cannot hold that many (a corrupt count would otherwise drive a huge loop or list)."""
        n = self.varint()
        if n * min_item_bytes > self.end - self.pos:
            raise self.fail(f"{what} count {n} exceeds the {self.end - self.pos} bytes left")
        return n

    def signed_varint(self) -> int:
        # Writer: x <<= 1; negative x is bit-inverted. Odd values are negative.
        v = self.varint()
        return ~(v >> 1) if v & 1 else v >> 1

    def uint(self, width: int) -> int:
        return int.from_bytes(self.take(width), "little")

    def int_list(self, width: int) -> tuple[int | None, ...]:
        """`varint n` + n little-endian signed ints; INT64_MIN (a dynamic dim) becomes None."""
        n = self.count("list", width)
        out: list[int | None] = []
        for _ in range(n):
            v = int.from_bytes(self.take(width), "little", signed=True)
            out.append(None if width == 8 and v == INT64_MIN else v)
        return tuple(out)

    def align(self, alignment: int, base: int = 0) -> None:
        """Skip padding up to the next multiple of `alignment` counted from `base`."""
        if alignment <= 0 or alignment & (alignment - 1) or alignment > 4096:
            raise self.fail(f"bad alignment {alignment}")
        pad = -(self.pos - base) % alignment
        self.take(pad)

    def expect_end(self, padding: bool = False) -> None:
        """Nothing may follow what was read, except (`padding`) the writers' 0xCB alignment bytes."""
        rest = self.data[self.pos:self.end]
        if rest and not (padding and rest.count(PADDING_BYTE) == len(rest)):
            raise self.fail(f"{len(rest)} unexpected trailing byte(s)")

    def sub(self, n: int, what: str) -> "Cursor":
        """A cursor over the next n bytes (which this cursor then skips)."""
        if self.pos + n > self.end:
            raise self.fail(f"{what} needs {n} bytes, {self.end - self.pos} left")
        c = Cursor(self.data, what, self.pos, self.pos + n, self.base)
        self.pos += n
        return c
