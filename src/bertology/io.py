"""Small file helpers shared by the commands."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _write_atomic(df: pd.DataFrame, path: str | Path, write) -> Path:
    """Write through a temporary file moved into place: a killed job never leaves half a table."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    write(df, tmp)
    tmp.replace(path)
    return path


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a CSV table atomically."""
    return _write_atomic(df, path, lambda d, p: d.to_csv(p, index=False))


def write_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a parquet table atomically."""
    return _write_atomic(df, path, lambda d, p: d.to_parquet(p, index=False))
