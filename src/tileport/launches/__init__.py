"""Launch specs: the concrete launches of a kernel, how they are written, where they come from.

- `spec`: the spec file's schema, launch records, reading / writing / merging, what the pipeline takes from
  them (the records of a kernel, their capture signatures);
- `infer`: launches derived from a kernel file's own host code (`ast` only);
- `record`: `tileport record -- <command>`, the launch hooks run in the user's program (`record_boot/`);
- `bounds`: the caps per kernel of a recording (specializations, launches) and the count of what they drop;
- `progress`: the progress line of `tileport record` and the relay of the command's stderr around it.

The names below are `spec`'s and `infer`'s, the ones callers use.
"""

from tileport.launches.infer import Inference, Missing, infer_launches
from tileport.launches.spec import (SPEC_SCHEMA, TRITON_DTYPE, LaunchArg, LaunchRecord, LaunchSpecError, canonical_dtype,
                                    captures, fit_problems, for_kernel, load_spec, merge, parse_spec, records_hash,
                                    spec_document, write_spec)

__all__ = ["Inference", "LaunchArg", "LaunchRecord", "LaunchSpecError", "Missing", "SPEC_SCHEMA", "TRITON_DTYPE",
           "canonical_dtype", "captures", "fit_problems", "for_kernel", "infer_launches", "load_spec", "merge",
           "parse_spec", "records_hash", "spec_document", "write_spec"]
