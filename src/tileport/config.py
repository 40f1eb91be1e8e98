"""Kernel configurations given by hand (`--config FILE` of `translate` and `port`).

One format, three spellings: JSON (`.json`), TOML (`.toml`, read with the standard library) or YAML
(`.yaml` / `.yml`, needs PyYAML). The file maps kernel names to the configurations in use:

    {"kernels": {"my_kernel": {"configs": [{"x": "float16", "TILE": 1024}], "ranks": {"x": 2}}}}

or, shorter, `{"my_kernel": [{"x": "float16", "TILE": 1024}]}`. A configuration maps array parameters to
an element dtype (torch or short name: "float16" / "f16"), runtime scalars to a dtype, and
`ct.Constant` parameters to their value. `ranks` gives array ranks the source does not show. A Triton
kernel's host-side tensor descriptor `d` (a `TensorDescriptor` argument) takes its element dtype under `d`
and its block shape under `d.block_shape` (a list; padding under `d.padding`: "zero" or "nan").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tileport.frontends.base import KernelConfig
from tileport.dtypes import TORCH_DTYPES


class ConfigError(ValueError):
    """The configuration file cannot be read or does not have the expected shape."""


def _parse(path: Path) -> Any:
    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix == ".toml":
        import tomllib
        return tomllib.loads(text)
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{path}: YAML configurations need PyYAML (pip install pyyaml); "
                              "or write the file as JSON or TOML") from None
        return yaml.safe_load(text)
    return json.loads(text)


def load_config(path: str | Path) -> dict[str, dict[str, Any]]:
    """{kernel: {"configs": [ {name: value} ...], "ranks": {array: rank}}}, validated."""
    path = Path(path)
    if not path.is_file():  # missing, a folder, a device or a FIFO (reading /dev/zero never ends)
        raise ConfigError(f"{path}: not a file")
    try:
        data = _parse(path)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - any parser's error (JSON, TOML, YAML) is the user's to fix
        raise ConfigError(f"{path}: {e}") from None
    kernels = data.get("kernels", data) if isinstance(data, dict) else None
    if not isinstance(kernels, dict):
        raise ConfigError(f"{path}: expected a mapping of kernel names to configurations")
    out = {}
    for name, spec in kernels.items():
        if isinstance(spec, list):
            spec = {"configs": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("configs", []), list):
            raise ConfigError(f"{path}: kernel `{name}` needs a list of configurations")
        configs = spec.get("configs", [])
        for c in configs:
            if not isinstance(c, dict) or not all(_config_value(k, v) for k, v in c.items()):
                raise ConfigError(f"{path}: kernel `{name}`: a configuration maps parameter names to a dtype "
                                  f"name or a number (a host-side tensor descriptor's `PARAM.block_shape` to a "
                                  f"list of positive integers), got {c!r}")
        ranks = spec.get("ranks", {})
        if not isinstance(ranks, dict) or not all(isinstance(r, int) and r > 0 for r in ranks.values()):
            raise ConfigError(f"{path}: kernel `{name}`: ranks map array names to positive integers")
        out[str(name)] = {"configs": [dict(c) for c in configs], "ranks": dict(ranks)}
    return out


def _config_value(key: Any, value: Any) -> bool:
    if str(key).endswith(".block_shape"):
        return isinstance(value, list) and bool(value) and all(type(x) is int and x > 0 for x in value)
    return isinstance(value, (str, int, float, bool))


def short_dtype(v: Any) -> Any:
    """torch dtype names ("float16") -> the translator's ("f16"); other values unchanged."""
    return TORCH_DTYPES.get(v, v) if isinstance(v, str) else v


def kernel_configs(loaded: dict[str, dict[str, Any]]) -> dict[str, KernelConfig]:
    """The translator's per-kernel configurations from `load_config`'s result."""
    return {k: KernelConfig(tuple({n: short_dtype(v) for n, v in c.items()} for c in spec["configs"]),
                            spec["ranks"]) for k, spec in loaded.items()}
