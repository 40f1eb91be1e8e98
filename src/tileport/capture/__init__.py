"""Tile IR of both sides of a port, on the CPU, and the proof built from them.

- `signature`: `Capture`, the concrete signature both sides are captured for;
- `source`: a user's kernel file rebuilt from its AST for cuTile's compiler (nothing of the file runs);
- `export`: cuTile Python's own export of a `@ct.kernel` object (our imported reference kernels);
- `ir`: the reference IR of a kernel file, the generated IR of its port (the cdylib's IR export), text,
  cubins, the IR diff of both;
- `verify`: the CPU proof per capture (IR both sides, cubins, IR diff, machine-code comparison).

`ir`'s names are this package's too, loaded on first use: the operator specs need `Capture` alone, and
importing them does not load the capture machinery (frontend, library loader, toolchain).
"""

from tileport.capture.signature import Capture

_IR = frozenset({"ARCHS", "CaptureError", "CubinResult", "SideCapture", "capture_side", "compile_cubin", "diff_port",
                 "disassemble", "frontend_reference", "generated_arg_roles", "generated_bytecode",
                 "generic_arguments", "ir_entry_name", "kernel_namespace", "reference_arg_roles",
                 "reference_bytecode", "source_files"})


def __getattr__(name: str):
    if name in _IR:
        from tileport.capture import ir
        return getattr(ir, name)
    raise AttributeError(f"module 'tileport.capture' has no attribute {name!r}")


__all__ = ["Capture", *sorted(_IR)]
