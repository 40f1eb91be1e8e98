"""Made-up device arrays for the CPU tests of the runtime: objects with `__cuda_array_interface__` (and
`__dlpack_device__`) whose device pointers are never dereferenced on the paths under test."""

from __future__ import annotations

import itertools

PTR = 0x7F00_0000_0000  # a made-up, 16-byte aligned device address
_next_fake = itertools.count()


def fake_address() -> int:
    """A fresh made-up device address, 16-byte aligned, 16 TiB from any other: arrays never alias."""
    return PTR + next(_next_fake) * (1 << 44)


class FakeArray:
    """A device array as far as the binding can tell: `__cuda_array_interface__` + `__dlpack_device__`."""

    def __init__(self, shape, typestr="<f4", ptr=None, strides=None, device=0, device_kind=2):
        ptr = fake_address() if ptr is None else ptr
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}
        self._device = (device_kind, device)

    @property
    def ptr(self) -> int:
        return self.__cuda_array_interface__["data"][0]

    def __dlpack_device__(self):
        return self._device


def f32(*shape, **kw):
    return FakeArray(shape, "<f4", **kw)
