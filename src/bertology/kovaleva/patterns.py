"""Kovaleva et al. 4.1: the five kinds of self-attention maps.

Classes (the paper's Figure 1): ``vertical`` (attention to [CLS]/[SEP]), ``diagonal`` (to the previous,
same or next token), ``vertical+diagonal`` (both), ``block`` (within-sentence attention of a sentence
pair), ``heterogeneous`` (anything else).

Two classifiers:

* :func:`classify_rule` — the documented default. For one map A (n x n, rows sum to 1), with queries
  restricted to the non-special positions Q (all rows when there are none), three masses:

  - V = mean over i in Q of sum_{s special} A[i, s]                    ([CLS] and [SEP] columns)
  - D = mean over i in Q of sum_{s not special, |i-s| <= 1} A[i, s]    (the previous/same/next band)
  - B = mean over i in Q of (sum_{s in Q, segment(s) = segment(i)} A[i, s]) / (sum_{s in Q} A[i, s])
    (the share of the non-special mass that stays within the query's sentence; only for inputs whose
    two segments both hold real tokens)

  each turned into its excess over uniform attention, X* = (X - X_uniform) / (1 - X_uniform) (X_uniform
  = the mass a uniform row would give; 0 for uniform attention, 1 when all mass is there, so short
  inputs are not called vertical or diagonal by chance). The first rule that holds, in this order:

  1. ``vertical+diagonal`` if V* >= 0.2 and D* >= 0.2 and V* + D* >= 0.6
  2. ``vertical``          if V* >= 0.5
  3. ``diagonal``          if D* >= 0.5
  4. ``block``             if the input is a pair and B* >= 0.6
  5. ``heterogeneous``     otherwise.

  The thresholds are :data:`RULE_THRESHOLDS`; the tests build maps of every kind and check the rule.

* :class:`PatternCNN` — the paper's classifier: 8 convolutional layers with ReLU on the map resized to
  ``size x size`` (area interpolation, scaled to max 1), trained from a researcher's label file
  (``example, layer, head, label``) with :func:`train_cnn`; the step ``patterns_sheet`` writes images of a
  seeded sample of maps (:func:`sample_maps`) and a label sheet to annotate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertology.pipeline.io import write_torch
from bertology.pipeline.errors import InputError, MissingInputError

log = logging.getLogger(__name__)

CLASSES: tuple[str, ...] = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}
RULE_THRESHOLDS = {"vd_each": 0.2, "vd_sum": 0.6, "vertical": 0.5, "diagonal": 0.5, "block": 0.6}


def _excess(mass: np.ndarray, uniform: float) -> np.ndarray:
    """(mass - uniform) / (1 - uniform): 0 for uniform attention, 1 for all of it; 0 when uniform >= 1."""
    if uniform >= 1.0:
        return np.zeros_like(mass)
    return (mass - uniform) / (1.0 - uniform)


def pattern_masses(attn: np.ndarray, special: np.ndarray, segment: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The excess masses V*, D*, B* of :func:`classify_rule` (see the module doc).

    attn: (..., n, n) maps of one example (e.g. (L, H, n, n)); special: (n,) bool ([CLS]/[SEP]);
    segment: (n,) int (the store's ``segment``: 0 first text, 1 second). Returns V*, D*, B*, each of shape (...,); B* is NaN unless both
    segments hold non-special tokens.
    """
    n = attn.shape[-1]
    special = np.asarray(special, bool)[:n]
    segment = np.asarray(segment)[:n]
    rows = ~special if (~special).any() else np.ones(n, bool)
    q = np.flatnonzero(rows)
    a = np.asarray(attn, dtype=np.float32)[..., q, :]  # (..., |Q|, n)
    keys_ok = ~special

    # V: the special columns, a matrix-vector product
    v_raw = (a @ special.astype(np.float32)).mean(-1, dtype=np.float64)
    v = _excess(v_raw, float(special.sum() / n))
    # D: the three diagonals i-1, i, i+1 (non-special keys only), gathered
    d_rows = np.zeros(a.shape[:-1], dtype=np.float64)
    band_size = np.zeros(q.size)
    for off in (-1, 0, 1):
        cols = q + off
        ok = (cols >= 0) & (cols < n)
        ok[ok] &= keys_ok[cols[ok]]
        d_rows[..., ok] += a[..., np.flatnonzero(ok), cols[ok]]
        band_size += ok
    d = _excess(d_rows.mean(-1), float(band_size.mean() / n))
    # B: the share of the non-special mass that stays in the query's own segment (one product per segment)
    segs = np.unique(segment[keys_ok])
    if segs.size >= 2:
        real_mass = a @ keys_ok.astype(np.float32)                   # (..., |Q|)
        own = np.zeros(a.shape[:-1], dtype=np.float64)
        same_share = np.zeros(q.size)
        for sg in segs:
            colmask = (segment == sg) & keys_ok
            mine = segment[q] == sg
            own[..., mine] = a[..., mine, :] @ colmask.astype(np.float32)
            same_share[mine] = colmask.sum() / keys_ok.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(real_mass > 0, own / real_mass, same_share)
        b = _excess(share.mean(-1), float(same_share.mean()))
    else:
        b = np.full(v.shape, np.nan)
    return v, d, b


def classes_of(v: np.ndarray, d: np.ndarray, b: np.ndarray, thresholds: dict[str, float] | None = None) -> np.ndarray:
    """Class index (into CLASSES) of every map from its excess masses V*, D*, B* (each (...,)): (...,) int8, the first
    rule of the module doc that holds."""
    t = {**RULE_THRESHOLDS, **(thresholds or {})}
    out = np.full(v.shape, CLASS_INDEX["heterogeneous"], dtype=np.int8)
    block = np.nan_to_num(b, nan=0.0) >= t["block"]
    out[block] = CLASS_INDEX["block"]
    out[d >= t["diagonal"]] = CLASS_INDEX["diagonal"]
    out[v >= t["vertical"]] = CLASS_INDEX["vertical"]
    vd = (v >= t["vd_each"]) & (d >= t["vd_each"]) & (v + d >= t["vd_sum"])
    out[vd] = CLASS_INDEX["vertical+diagonal"]
    return out


def classify_rule(attn: np.ndarray, special: np.ndarray, segment: np.ndarray,
                  thresholds: dict[str, float] | None = None) -> np.ndarray:
    """Class index (into CLASSES) of every map: attn (..., n, n) -> (...,) int8. See the module doc."""
    return classes_of(*pattern_masses(attn, special, segment), thresholds)


def classify_rule_exact(attn: np.ndarray, special: np.ndarray, segment: np.ndarray,
                        thresholds: dict[str, float] | None = None) -> np.ndarray:
    """:func:`classify_rule` of one example's maps, the same classes, from one matrix product.

    attn: (L, H, n, n) float32 holding float16 values (a store's attention); special, segment: (n,) as for
    :func:`pattern_masses`. Returns (L, H) int8.

    Every float16 value is a multiple of 2**-24, so a float32 sum of non-negative ones is exact, in any order, while
    the sum stays below 1 (no partial sum exceeds the whole); one that reaches 1 may be off by at most 2**-24 per
    value summed. The row masses (special keys, each segment's ordinary keys) come from ONE float32 product
    (L*H*n, n) @ (n, masks) instead of :func:`pattern_masses`' products per map and mask: below
    1 - n * 2**-24 both are exact, hence equal, and V*, D*, B* are computed from them by the same operations, bit for
    bit. A map with a mass above that bound has masses within 8 n 2**-24 / (1 - uniform mass) of
    :func:`pattern_masses`'; if one of its V*, V* + D*, B* lies that close to a threshold, :func:`classify_rule`
    itself classifies it.
    """
    t = {**RULE_THRESHOLDS, **(thresholds or {})}
    n = attn.shape[-1]
    special = np.asarray(special, bool)[:n]
    segment = np.asarray(segment)[:n]
    a = np.asarray(attn, dtype=np.float32)
    keys_ok = ~special
    rows = keys_ok if keys_ok.any() else np.ones(n, bool)
    q = np.flatnonzero(rows)
    segs = np.unique(segment[keys_ok])
    colmasks = [(segment == sg) & keys_ok for sg in segs] if segs.size >= 2 else []
    masks = np.stack([special, *colmasks], axis=1).astype(np.float32)  # (n, 1 + segments)
    mass = (a.reshape(-1, n) @ masks).reshape(a.shape[:-1] + (masks.shape[1],))[..., q, :]  # (..., |Q|, masks)
    exact_below = 1.0 - n * 2.0 ** -24
    rounded = (mass >= exact_below).any(axis=(-1, -2))
    u_v = float(special.sum() / n)
    v = _excess(mass[..., 0].astype(np.float64).mean(-1), u_v)
    d_rows = np.zeros(a.shape[:-2] + (q.size,), dtype=np.float64)
    band_size = np.zeros(q.size)
    for off in (-1, 0, 1):
        cols = q + off
        ok = (cols >= 0) & (cols < n)
        ok[ok] &= keys_ok[cols[ok]]
        d_rows[..., ok] += a[..., q[ok], cols[ok]]
        band_size += ok
    d = _excess(d_rows.mean(-1), float(band_size.mean() / n))
    u_b = 0.0
    if colmasks:
        real_mass = mass[..., 1:].sum(axis=-1, dtype=np.float64)  # exact where each segment's mass is
        rounded |= (real_mass >= exact_below).any(axis=-1)
        own = np.zeros(real_mass.shape, dtype=np.float64)
        same_share = np.zeros(q.size)
        for i, colmask in enumerate(colmasks):
            mine = segment[q] == segs[i]
            own[..., mine] = mass[..., mine, 1 + i]
            same_share[mine] = colmask.sum() / keys_ok.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(real_mass > 0, own / real_mass, same_share)
        u_b = float(same_share.mean())
        b = _excess(share.mean(-1), u_b)
    else:
        b = np.full(v.shape, np.nan)
    out = classes_of(v, d, b, t)
    if rounded.any():
        slack = 1.0 - max(u_v, u_b)
        tol = 8.0 * n * 2.0 ** -24 / slack if slack > 0.05 else np.inf
        close = (np.abs(v - t["vd_each"]) <= tol) | (np.abs(v - t["vertical"]) <= tol)
        close |= np.abs(v + d - t["vd_sum"]) <= tol
        close |= np.abs(np.nan_to_num(b, nan=-np.inf) - t["block"]) <= tol
        redo = rounded & close
        if redo.any():
            out[redo] = classify_rule(a[redo], special, segment, t)
    return out


# --------------------------------------------------------------------------------------------------
# The paper's CNN


def resize_maps(maps: list[np.ndarray] | np.ndarray, size: int) -> np.ndarray:
    """Variable-size maps [(n, n), ...] -> (N, 1, size, size) float32, area-resized, scaled to max 1."""
    import torch
    import torch.nn.functional as F

    out = np.zeros((len(maps), 1, size, size), dtype=np.float32)
    for i, m in enumerate(maps):
        t = torch.as_tensor(np.nan_to_num(np.asarray(m, dtype=np.float32)))[None, None]
        r = F.interpolate(t, size=(size, size), mode="area")[0, 0].numpy()
        peak = r.max()
        out[i, 0] = r / peak if peak > 0 else r
    return out


def build_cnn(size: int = 32, n_classes: int = len(CLASSES)):
    """8 conv layers (3x3, ReLU; max-pooling after every second), global average pooling, a linear head.

    Input (N, 1, size, size); output (N, n_classes) logits.
    """
    import torch.nn as nn

    widths = [8, 8, 16, 16, 32, 32, 32, 32]
    layers: list[nn.Module] = []
    c_in = 1
    for i, c_out in enumerate(widths):
        layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU()]
        if i % 2 == 1 and i < len(widths) - 1:
            layers.append(nn.MaxPool2d(2))
        c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, n_classes)]
    return nn.Sequential(*layers)


@dataclass
class PatternCNN:
    """A trained CNN with its input size; ``predict(maps)`` returns class indices into CLASSES."""

    model: object
    size: int = 32

    def predict(self, maps: list[np.ndarray] | np.ndarray, batch_size: int = 512) -> np.ndarray:
        import torch

        x = resize_maps(maps, self.size)
        self.model.eval()
        preds = []
        with torch.no_grad():
            for i in range(0, len(x), batch_size):
                preds.append(self.model(torch.from_numpy(x[i:i + batch_size])).argmax(-1).numpy())
        return np.concatenate(preds).astype(np.int8) if preds else np.zeros(0, np.int8)

    def save(self, path: str | Path) -> None:
        write_torch({"state_dict": self.model.state_dict(), "size": self.size, "classes": list(CLASSES)}, path)

    @classmethod
    def load(cls, path: str | Path) -> "PatternCNN":
        import torch

        path = Path(path)
        if not path.is_file():
            raise MissingInputError(f"pattern classifier {str(path)!r} not found: set analysis.patterns.classifier to "
                                    f"'rule' or to a file written by `bertology patterns-train`")
        try:  # weights_only: a pickle that names any other object is refused, never run
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - UnpicklingError, RuntimeError (not a torch file): one line
            raise InputError(f"{path} cannot be read as a pattern classifier ({type(err).__name__}: "
                             f"{' '.join(str(err).split())[:200]}); give a file written by `bertology patterns-train`"
                             ) from None
        if not isinstance(blob, dict) or list(blob.get("classes", [])) != list(CLASSES):
            classes = blob.get("classes") if isinstance(blob, dict) else type(blob).__name__
            raise InputError(f"{path} was trained for classes {classes}, expected {list(CLASSES)}")
        model = build_cnn(int(blob["size"]))
        model.load_state_dict(blob["state_dict"])
        return cls(model, int(blob["size"]))


def train_cnn(maps: list[np.ndarray], labels: list[str], *, size: int = 32, epochs: int = 60, seed: int = 0,
              holdout: float = 0.2, lr: float = 3e-3) -> tuple[PatternCNN, dict]:
    """Train the 8-conv-layer CNN on labelled maps (n x n each) and report held-out macro F1.

    Class-weighted cross-entropy, Adam, full-batch epochs. A stratified `holdout` share (when every class
    has at least 2 maps) is kept out for the report; the returned model is refit on all maps.
    """
    import torch
    from sklearn.metrics import f1_score
    from sklearn.model_selection import train_test_split

    unknown = sorted(set(labels) - set(CLASSES))
    if unknown:
        raise InputError(f"unknown pattern label(s) {unknown} in the label file; use one of {list(CLASSES)}")
    y = np.array([CLASS_INDEX[l] for l in labels])
    x = resize_maps(maps, size)

    def fit(xs: np.ndarray, ys: np.ndarray):
        torch.manual_seed(seed)
        model = build_cnn(size)
        counts = np.bincount(ys, minlength=len(CLASSES)).astype(np.float32)
        weights = torch.tensor(np.where(counts > 0, counts.sum() / np.maximum(counts, 1) / len(CLASSES), 0.0),
                               dtype=torch.float32)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
        xt, yt = torch.from_numpy(xs), torch.from_numpy(ys).long()
        model.train()
        for _ in range(epochs):
            perm = torch.randperm(len(xt))
            for i in range(0, len(xt), 64):
                b = perm[i:i + 64]
                opt.zero_grad()
                loss = loss_fn(model(xt[b]), yt[b])
                loss.backward()
                opt.step()
        return PatternCNN(model, size)

    report: dict = {"n": int(len(y)), "counts": {c: int((y == i).sum()) for i, c in enumerate(CLASSES)}}
    counts = np.bincount(y, minlength=len(CLASSES))
    if holdout > 0 and len(y) >= 10 and counts[counts > 0].min() >= 2:
        tr, te = train_test_split(np.arange(len(y)), test_size=holdout, random_state=seed, stratify=y)
        pred = fit(x[tr], y[tr]).predict([maps[i] for i in te])
        report["holdout_f1_macro"] = float(f1_score(y[te], pred, average="macro"))
        report["holdout_accuracy"] = float((pred == y[te]).mean())
        report["holdout_n"] = int(len(te))
    return fit(x, y), report


def sample_maps(n_examples: int, layers: int, heads: int, count: int, seed: int) -> np.ndarray:
    """A seeded sample of distinct (example position, layer, head) triples: (count, 3) int
    (:func:`bertology.data.sample_positions` over the flat L*H*E index)."""
    from bertology.data import sample_positions

    flat = sample_positions(n_examples * layers * heads, count, seed)
    return np.stack(np.unravel_index(flat, (n_examples, layers, heads)), axis=1)


def labelled_maps(labels, stores: list) -> tuple[list[np.ndarray], list[str]]:
    """Maps (n x n) for the rows of a label sheet: columns example, layer, head, label (+ optional task, variant
    picking the store among `stores`, lazily opened attention stores). Returns (maps, labels)."""
    import pandas as pd

    need = {"example", "layer", "head", "label"}
    if not need <= set(labels.columns):
        raise InputError(f"the label file needs columns {sorted(need)}; got {list(labels.columns)}")
    labels = labels[labels["label"].notna() & (labels["label"].astype(str).str.strip() != "")]
    if labels.empty:
        raise InputError("the label file has no filled-in `label`: annotate the sheet first")
    maps, names = [], []
    for _, row in labels.iterrows():
        candidates = [d for d in stores if all(str(d.attrs.get(k)) == str(row[k]) for k in ("task", "variant")
                                               if k in row and pd.notna(row[k]))]
        if not candidates:
            raise InputError(f"no store for task={row.get('task')} variant={row.get('variant')} (label row "
                             f"{row.name}): give it as --input store=PATH")
        ds = candidates[0]
        pos = np.flatnonzero(ds["example_idx"].values == int(row["example"]))
        if pos.size == 0:
            raise InputError(f"example {row['example']} is not in the store {ds.attrs.get('task')}/"
                             f"{ds.attrs.get('variant')}")
        try:
            layer, head = int(row["layer"]), int(row["head"])
        except (TypeError, ValueError):
            layer = head = -1
        L, H = int(ds.sizes["layer"]), int(ds.sizes["head"])
        if not (0 <= layer < L and 0 <= head < H):  # a negative index would silently read another head
            raise InputError(f"label row {row.name} (line {int(row.name) + 2} of the label file): layer "
                             f"{row['layer']!r}, head {row['head']!r} are not in 0..{L - 1} x 0..{H - 1}")
        ex = ds.isel(example=int(pos[0]))
        n = int(ex["length"])
        maps.append(ex["attention"][layer, head, :n, :n].values.astype(np.float32))
        names.append(str(row["label"]).strip())
    return maps, names
