"""Value Zeroing's float64 cosine against float32 cosines (the authors'), and method "forward" against the default
"subtract": the embedded MiniLM (its classification head untrained: Value Zeroing stops at the layers), the first 8
MRPC dev pairs; max over examples of max_j |a_j - b_j| / max_j |b_j| of the top [CLS] rollout row, and Spearman's
rho (min, median). docs/reference.md#newer-mixing-views lists the figures.

    BERTOLOGY_GLUE=/work/shared/data/glue PYTHONPATH=src .venv/bin/python bench/bench_vz_cosine.py
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.stats as st
import torch

from bertology.models.loading import load_encoder, load_tokenizer, resolve_model
from bertology.norms import alti_globenc as ag
from bertology.norms import mixparts as mp
from bertology.norms import value_zeroing as vz

GLUE = Path(os.environ.get("BERTOLOGY_GLUE", Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"))


def float32_cosines(intact: torch.Tensor, zeroed: torch.Tensor) -> torch.Tensor:
    """vz.cosine_distance_matrix with the cosine in the outputs' float32, as the authors' code."""
    cos = torch.nn.functional.cosine_similarity(zeroed, intact[None].to(zeroed.dtype), dim=-1)
    return ag.normalise_rows((1 - cos).T.clamp(min=0)).double()


def main() -> None:
    torch.set_num_threads(2)
    name = resolve_model("minilm-l6")
    clf, tok = load_encoder(name, classifier=True), load_tokenizer(name)
    df = pd.read_csv(GLUE / "MRPC" / "dev.tsv", sep="\t", quoting=3)
    parts = mp.layer_parts(clf)
    default = vz.cosine_distance_matrix
    res: dict[str, list[tuple[float, float]]] = {"float32 cosine": [], "method forward": []}
    for r in range(8):
        inputs = dict(tok(df.iloc[r, 3], df.iloc[r, 4], return_tensors="pt"))
        base = ag.rollout(vz.value_zeroing(clf, parts, inputs).double())[0].numpy()
        vz.cosine_distance_matrix = float32_cosines
        try:
            c32 = ag.rollout(vz.value_zeroing(clf, parts, inputs).double())[0].numpy()
        finally:
            vz.cosine_distance_matrix = default
        fw = ag.rollout(vz.value_zeroing(clf, parts, inputs, "forward").double())[0].numpy()
        for key, other in (("float32 cosine", c32), ("method forward", fw)):
            res[key].append((float(np.abs(other - base).max() / np.abs(base).max()),
                             float(st.spearmanr(other, base)[0])))
    for key, rows in res.items():
        a = np.array(rows)
        print(f"{key}: max rel {a[:, 0].max():.2g}, rho min {a[:, 1].min():.4f} median {np.median(a[:, 1]):.4f}")


if __name__ == "__main__":
    main()
