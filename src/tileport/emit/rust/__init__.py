"""The cuTile Rust (cutile crate 0.5.0) target: the lowering table and its shims, the device-code and
launcher emitters, identifiers, and the aggregated crate."""
