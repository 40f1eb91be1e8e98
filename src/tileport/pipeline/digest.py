"""Content hashes of the pipeline (fingerprints, cache keys): a leaf module every stage may import."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sha256(*parts: Any) -> str:
    """One hash over `parts`: bytes as they are, a Path by its file's bytes, anything else as sorted JSON."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, bytes):
            h.update(p)
        elif isinstance(p, Path):
            h.update(p.read_bytes() if p.is_file() else b"<missing>")
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()
