"""A folder's files as bytes, for tests that check two outputs are the same files, bit for bit."""

from __future__ import annotations

import os
from pathlib import Path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root (links followed), by relative path; Snakemake's timestamp file left out."""
    out = {}
    for dirpath, _, names in os.walk(root, followlinks=True):
        for name in names:
            if name != ".snakemake_timestamp":
                path = Path(dirpath) / name
                out[str(path.relative_to(root))] = path.read_bytes()
    return out
