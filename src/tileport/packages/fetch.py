"""The package a run takes: a folder, a wheel, an sdist, or a pip requirement (`liger-kernel==0.8.5`).

Archives are unpacked under OUT/source/ (their `.py` files only; a member that would land outside that
folder, a link, or an oversized member is left out); a requirement is downloaded into OUT/download/ with
`pip download --no-deps --only-binary=:all:` (never installed, pip's cache off, its temporary files under
OUT), trying the running Python's version, then the newer and older ones a wheel may be built for. Nothing
of the package runs: pip runs no code of a wheel, and for a package with no wheel the sdist is fetched from
the index's JSON listing (PEP 691) rather than by pip, which would run its build to read its metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

# A requirement with a version specifier (a bare word is taken for a path: no surprise download).
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9._,-]*\])?\s*"
                         r"(?P<spec>(===|==|>=|<=|~=|!=|>|<)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(===|==|>=|<=|~=|!=|>|<)"
                         r"\s*[A-Za-z0-9.*+!_-]+)*)$")
SDIST_SUFFIXES = (".tar.gz", ".tgz", ".zip")
PYTHON_VERSIONS = (None, "3.13", "3.12", "3.11", "3.10")  # None: the running interpreter's
MAX_MEMBER_BYTES = 16 << 20
MAX_TOTAL_BYTES = 1 << 30
MAX_DOWNLOAD_BYTES = 512 << 20
DEFAULT_INDEX = "https://pypi.org/simple"


class FetchError(ValueError):
    """The input is no package tileport can open (the message says why and what to give instead)."""


@dataclass
class PackageSource:
    root: Path  # the folder to index
    label: str  # what was given (for reports)
    kind: str  # "folder" | "wheel" | "sdist" | "pip"
    archive: Path | None = None  # the wheel or sdist unpacked


def is_package_input(arg: str) -> bool:
    """A folder, a wheel or sdist file, or a requirement with a version specifier (package mode)."""
    path = Path(arg)
    if path.is_dir():
        return True
    if path.is_file():
        return is_archive(path)
    return is_requirement(arg)


def is_archive(path: Path) -> bool:
    return path.name.endswith(".whl") or path.name.endswith(SDIST_SUFFIXES)


def is_requirement(arg: str) -> bool:
    return "/" not in arg and not arg.endswith(".py") and REQUIREMENT.match(arg.strip()) is not None


def open_package(arg: str, out: Path, timeout: float = 300.0) -> PackageSource:
    """The folder to index for `arg` (see the module docstring); FetchError when there is none."""
    path = Path(arg)
    if path.is_dir():
        return PackageSource(path.resolve(), arg, "folder")
    if path.is_file():
        if not is_archive(path):
            raise FetchError(f"{arg}: not a package folder, wheel (.whl) or sdist ({', '.join(SDIST_SUFFIXES)})")
        return PackageSource(unpack(path, out / "source"), arg, "wheel" if path.name.endswith(".whl") else "sdist",
                             path.resolve())
    if not is_requirement(arg):
        raise FetchError(f"{arg}: no such folder or file, and no pip requirement with a version "
                         "(`name==1.2.3`)")
    archive = download(arg.strip(), out, timeout)
    return PackageSource(unpack(archive, out / "source"), arg, "pip", archive)


# ---------------------------------------------------------------- download

def download(requirement: str, out: Path, timeout: float) -> Path:
    """The wheel pip downloads for `requirement` (each Python version in turn), else the sdist of a pinned
    version from the index; FetchError with pip's last words when there is neither."""
    dest, tmp = out / "download", out / "tmp"
    dest.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp.resolve()), "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    errors = []
    try:
        for version in PYTHON_VERSIONS:
            before = set(dest.iterdir())
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
                   "--progress-bar", "off", "--retries", "1", "--timeout", "30", "-q", "-d", str(dest)]
            cmd += ["--python-version", version] if version else []
            try:
                r = run_tool(cmd + [requirement], timeout, env=env)
            except ToolTimeout:
                raise FetchError(f"pip download {requirement}: no answer in {timeout:.0f} s") from None
            new = sorted(p for p in set(dest.iterdir()) - before if p.name.endswith(".whl"))
            wheels = new or _matching(dest, requirement, ".whl")
            if r.returncode == 0 and wheels:
                return wheels[0]
            lines = (r.stderr or r.stdout).strip().splitlines()
            errors.append(f"python {version or 'current'}: {lines[-1] if lines else 'no output'}")
        return sdist_from_index(requirement, dest, timeout, errors)
    finally:
        if tmp.is_dir() and not any(tmp.iterdir()):
            tmp.rmdir()


def _matching(dest: Path, requirement: str, suffix: str) -> list[Path]:
    """Files of an earlier download of the same pinned requirement (pip keeps them and says nothing)."""
    m = REQUIREMENT.match(requirement)
    pin = m.group("spec")[2:].strip() if m and m.group("spec").startswith("==") else None
    if not pin:
        return []
    stem = normalize(m.group("name")).replace("-", "_")
    return sorted(p for p in dest.iterdir() if p.name.endswith(suffix) and
                  normalize(p.name).replace("-", "_").startswith(f"{stem}_{normalize(pin).replace('-', '_')}"))


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sdist_from_index(requirement: str, dest: Path, timeout: float, errors: list[str]) -> Path:
    """The sdist of `name==version` from the index's JSON listing, its sha256 checked."""
    m = REQUIREMENT.match(requirement)
    spec = m.group("spec") if m else ""
    if not spec.startswith("==") or "," in spec or "*" in spec:
        raise FetchError(f"no wheel of {requirement} ({'; '.join(errors)}); for an sdist, pin one version "
                         "(`name==1.2.3`)")
    if os.environ.get("PIP_NO_INDEX"):
        raise FetchError(f"no wheel of {requirement} ({'; '.join(errors)}), and no index to take its sdist from "
                         "(PIP_NO_INDEX): give the sdist file")
    name, version = m.group("name"), spec[2:].strip()
    index = os.environ.get("PIP_INDEX_URL", DEFAULT_INDEX).rstrip("/")
    page = f"{index}/{normalize(name)}/"
    listing = _json(page, timeout)
    stems = {f"{n}-{version}".lower() for n in (name, name.replace("-", "_"), normalize(name))}
    files = [f for f in listing.get("files", []) if not f.get("yanked")
             and any(f["filename"].lower() == s + suffix for s in stems for suffix in SDIST_SUFFIXES)]
    if not files:
        raise FetchError(f"no wheel of {requirement} ({'; '.join(errors)}) and no sdist of it on {index}")
    chosen = files[0]
    if "/" in chosen["filename"] or chosen["filename"].startswith("."):
        raise FetchError(f"{page}: unsafe file name {chosen['filename']!r}")
    data = _fetch(urllib.parse.urljoin(page, chosen["url"]), timeout)
    want = chosen.get("hashes", {}).get("sha256")
    if want and hashlib.sha256(data).hexdigest() != want:
        raise FetchError(f"{chosen['filename']}: sha256 differs from the index's")
    target = dest / chosen["filename"]
    target.write_bytes(data)
    return target


def _json(url: str, timeout: float) -> dict:
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return json.loads(r.read(MAX_DOWNLOAD_BYTES))
    except (OSError, ValueError) as e:
        raise FetchError(f"{url}: {e}") from None


def _fetch(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            data = r.read(MAX_DOWNLOAD_BYTES + 1)
    except OSError as e:
        raise FetchError(f"{url}: {e}") from None
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise FetchError(f"{url}: larger than {MAX_DOWNLOAD_BYTES >> 20} MiB")
    return data


# ---------------------------------------------------------------- unpack

def unpack(archive: Path, dest: Path) -> Path:
    """The `.py` files of a wheel or sdist under dest/<archive name>/ (see the module docstring)."""
    name = archive.name
    for suffix in (".whl", *SDIST_SUFFIXES):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    root = (dest / name).resolve()
    try:
        members = _zip_members(archive) if zipfile.is_zipfile(archive) else _tar_members(archive)
        total = 0
        for member, read in members:
            target = (root / member).resolve()
            if not member.endswith(".py") or root not in target.parents:
                continue
            data = read()
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise FetchError(f"{archive.name}: more than {MAX_TOTAL_BYTES >> 20} MiB of Python files")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
        raise FetchError(f"{archive}: cannot be unpacked: {e}") from None
    if not root.is_dir():
        raise FetchError(f"{archive.name}: holds no Python file")
    return root


def _zip_members(archive: Path):
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
            if info.is_dir() or is_link or info.file_size > MAX_MEMBER_BYTES:
                continue
            yield info.filename, (lambda info=info: z.read(info))


def _tar_members(archive: Path):
    with tarfile.open(archive) as t:
        for m in t:
            if not m.isreg() or m.size > MAX_MEMBER_BYTES:
                continue  # links, devices and folders are never made
            yield m.name, (lambda m=m: t.extractfile(m).read())
