"""tileport: deterministic cuTile Python -> cuTile Rust porting, with proofs."""

__version__ = "0.1.0"
