"""Where tileport keeps what it builds or measures for reuse across runs (never inside a user's tree).

Captures and cubins are content-addressed files (`DiskCache`), shared by `tileport port` and
`tileport verify`: a file is stored under the hash of everything that determines it (its input bytes,
the tool and its arguments), so a hit is the file the tool would write again; a cache that cannot be
written only costs time. Their root is $TILEPORT_CACHE_DIR, else $XDG_CACHE_HOME/tileport/pipeline,
else ~/.cache/tileport/pipeline.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def user_cache_dir(env: str, name: str) -> Path:
    """$`env` when set, else $XDG_CACHE_HOME/tileport/`name`, else ~/.cache/tileport/`name`."""
    if os.environ.get(env):
        return Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tileport" / name


def default_root() -> Path:
    """The root of the capture and cubin cache."""
    return user_cache_dir("TILEPORT_CACHE_DIR", "pipeline")


def tool_key(tool: Path | None) -> str:
    """A tool's identity in cache keys: path, size and modification time (a new install is a new key)."""
    if tool is None:
        return "missing"
    st = tool.stat()
    return f"{tool}:{st.st_size}:{int(st.st_mtime)}"


class DiskCache:
    """Content-addressed files: <root>/<kind>/<key[:2]>/<key>.<ext>."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, kind: str, key: str, ext: str) -> Path:
        return self.root / kind / key[:2] / f"{key}.{ext}"

    def get(self, kind: str, key: str, ext: str) -> bytes | None:
        p = self.path(kind, key, ext)
        try:
            return p.read_bytes()
        except OSError:
            return None

    def put(self, kind: str, key: str, ext: str, data: bytes) -> None:
        p = self.path(kind, key, ext)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(p)
        except OSError:
            pass  # a cache that cannot be written only costs time


def sha256(*parts: Any) -> str:
    """One hash over `parts` (cache keys, the pipeline's fingerprints): bytes as they are, a Path by its file's
    bytes, anything else as sorted JSON."""
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
