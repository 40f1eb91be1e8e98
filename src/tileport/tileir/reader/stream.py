"""A byte cursor with the bytecode's primitive encodings (LEB128 varints, fixed-width int lists)."""

from __future__ import annotations

INT64_MIN = -(1 << 63)


class BytecodeError(ValueError):
    """The input is not valid Tile IR bytecode (or uses something this reader does not know)."""


class Cursor:
    __slots__ = ("data", "pos", "end", "what")

    def __init__(self, data: bytes, what: str, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.what = what

    def fail(self, message: str) -> BytecodeError:
        return BytecodeError(f"{self.what} at byte {self.pos}: {message}")

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
            if shift > 70:
                raise self.fail("varint too long")

    def signed_varint(self) -> int:
        # Writer: x <<= 1; negative x is bit-inverted. Odd values are negative.
        v = self.varint()
        return ~(v >> 1) if v & 1 else v >> 1

    def uint(self, width: int) -> int:
        return int.from_bytes(self.take(width), "little")

    def int_list(self, width: int) -> tuple[int | None, ...]:
        """`varint n` + n little-endian signed ints; INT64_MIN (a dynamic dim) becomes None."""
        n = self.varint()
        out: list[int | None] = []
        for _ in range(n):
            v = int.from_bytes(self.take(width), "little", signed=True)
            out.append(None if width == 8 and v == INT64_MIN else v)
        return tuple(out)

    def align(self, alignment: int, base: int = 0) -> None:
        """Skip padding up to the next multiple of `alignment` counted from `base`."""
        if alignment <= 0:
            raise self.fail(f"bad alignment {alignment}")
        pad = -(self.pos - base) % alignment
        self.take(pad)

    def sub(self, n: int, what: str) -> "Cursor":
        """A cursor over the next n bytes (which this cursor then skips)."""
        if self.pos + n > self.end:
            raise self.fail(f"{what} needs {n} bytes, {self.end - self.pos} left")
        c = Cursor(self.data, what, self.pos, self.pos + n)
        self.pos += n
        return c
