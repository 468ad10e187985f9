"""Small file helpers shared by the commands."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a table atomically (a temporary file moved into place): a killed job never leaves half a CSV."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)
    return path
