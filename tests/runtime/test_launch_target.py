"""A launch never drops a borrowed CUDA stream (regression: CUDA-graph capture of cutile-rs launches
failed in every capture mode, and a launch cost 16.8 µs on the host).

cuda-core's `Drop for Stream` calls `cuStreamQuery` on the stream, which is illegal while the stream
is being captured (the capture is invalidated whatever the capture mode), and on a busy stream it
records an event and hands the stream to a completion worker thread. The launchers used to wrap the
caller's stream in a fresh `Stream` per launch and dropped it when the launch returned. They now
take the (device, stream) target from a process-lifetime cache (support.rs `LaunchTarget::get`), so
no `Stream` is ever dropped on the launch path. CPU: the generated code is checked here; the GPU
side (capture in every mode, replay against eager runs) is tests/gpu/test_callpath.py.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUPPORT_RS = REPO / "src" / "tileport" / "emit" / "templates" / "support.rs"
CRATE_SRC = REPO / "rust" / "src"
LAUNCHER = re.compile(r'pub unsafe extern "C" fn (tileport_\w+)\(.*?\n\}\n', re.S)


def _launchers() -> dict[str, str]:
    """C symbol -> body of every generated kernel launcher."""
    out = {}
    for path in sorted(CRATE_SRC.glob("*.rs")):
        if path.name in ("support.rs", "lib.rs"):
            continue
        for m in LAUNCHER.finditer(path.read_text()):
            out[m.group(1)] = m.group(0)
    return out


def _function(text: str, name: str) -> str:
    """The text of `fn name` up to the next top-level item (4-space indented methods included)."""
    start = text.index(f"fn {name}(")
    end = text.find("\n    }\n", start)
    return text[start:end]


def test_every_launcher_takes_the_cached_target():
    launchers = _launchers()
    assert len(launchers) >= 21, sorted(launchers)  # one per corpus kernel at least
    for symbol, body in launchers.items():
        assert "LaunchTarget::get(device_id, stream)?" in body, symbol
        assert "LaunchTarget::new" not in body and "Stream::borrow_raw" not in body, symbol


def test_a_stream_is_borrowed_only_into_the_process_lifetime_cache():
    text = SUPPORT_RS.read_text()
    assert text.count("Stream::borrow_raw(") == 1
    get = _function(text, "get")
    assert "Stream::borrow_raw(" in get
    assert "Box::leak(" in get and "map.insert((device_id, stream), target)" in get
    assert "static TARGETS: OnceLock<TargetMap>" in get  # a static is never dropped
    # the only way to make a target, and nothing that would drop one
    assert len(re.findall(r"LaunchTarget \{ context", text)) == 1
    assert "impl Drop for LaunchTarget" not in text
    assert "fn new(device_id" not in text


def test_output_overlap_check_allocates_nothing():
    body = _function(SUPPORT_RS.read_text(), "require_disjoint")
    assert "Vec" not in body and ".collect" not in body
