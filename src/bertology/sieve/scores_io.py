"""The per-example sieve scores file (``sieve_scores.npz``): written by the ``sieve`` step, read by the
figures, the summary and the explorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bertology.pipeline.errors import MissingInputError, snakemake_command
from bertology.pipeline.io import write_npz


def scores_arrays(scores: xr.DataArray, **attrs: Any) -> dict[str, np.ndarray]:
    """The arrays of sieve_scores.npz: scores (E, L, H, R) float32, example_idx (E,), layer (L,), head (H,),
    role (R,) and attrs (``key=value`` strings)."""
    return {"scores": scores.values.astype(np.float32), "example_idx": scores["example_idx"].values,
            "layer": scores["layer"].values, "head": scores["head"].values,
            "role": np.asarray(scores["role"].values, dtype=str),
            "attrs": np.asarray([f"{k}={v}" for k, v in attrs.items()], dtype=str)}


def write_scores(path: str | Path, scores: xr.DataArray, **attrs: Any) -> Path:
    """Write per-example scores as a compressed .npz (:func:`scores_arrays`), atomically."""
    return write_npz(scores_arrays(scores, **attrs), path)


def read_scores(path: str | Path) -> xr.DataArray:
    """Per-example scores written by :func:`write_scores`: DataArray (example, layer, head, role)."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"no sieve scores at {path}; run `{snakemake_command(path)}` first")
    with np.load(path, allow_pickle=False) as z:
        attrs = dict(s.split("=", 1) for s in z["attrs"].tolist())
        return xr.DataArray(z["scores"], dims=("example", "layer", "head", "role"),
                            coords={"example_idx": ("example", z["example_idx"]), "layer": z["layer"],
                                    "head": z["head"], "role": z["role"].tolist()},
                            name="sieve_score", attrs=attrs)
