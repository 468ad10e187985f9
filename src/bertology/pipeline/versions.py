"""What a remembered answer was computed with: installed package versions and the source of package modules.

Both are read without importing the packages or modules they describe (the version from the package metadata,
the source as bytes), so a key built from them costs a few file reads: the model capabilities
(:mod:`bertology.analyses.capability`) and the between-workflow cache's code version
(:mod:`bertology.workflow.provenance`) are keyed with them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

#: the bertology package's folder (src/bertology): module paths are relative to it
PACKAGE = Path(__file__).parents[1]


def package_version(name: str, missing: str = "none") -> str:
    """The installed version of distribution `name` (``importlib.metadata``), or `missing` when it is not
    installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return missing


def source_files(rels: Iterable[str], root: Path = PACKAGE) -> list[Path]:
    """The files `rels` names under `root`, in order: a file as itself, a folder as its ``*.py`` files, sorted."""
    files: list[Path] = []
    for rel in rels:
        path = root / rel
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def source_digest(rels: Iterable[str], root: Path = PACKAGE) -> str:
    """SHA-256 (64 hex digits) of :func:`source_files`: each file's path relative to `root`, then its bytes."""
    h = hashlib.sha256()
    for path in source_files(rels, root):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()
