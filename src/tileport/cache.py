"""Where tileport keeps what it builds or measures for reuse across runs (never inside a user's tree)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(env: str, name: str) -> Path:
    """$`env` when set, else $XDG_CACHE_HOME/tileport/`name`, else ~/.cache/tileport/`name`."""
    if os.environ.get(env):
        return Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tileport" / name
