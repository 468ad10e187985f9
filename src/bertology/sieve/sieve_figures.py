"""Figures of Pande et al. 2021 from sieve.csv and the per-example scores.

- :func:`plot_scores`  Fig. 3: distribution of sieve scores (ECDF per role) and of the heads' p-values;
- :func:`plot_overlap` Fig. 4: overlap of the coarse roles across heads as an UpSet plot with counts;
- :func:`plot_roles`   Fig. 5: layer x head grid, each head a cell of small squares, one per fine role,
  heads sorted within each layer by their number of roles (multi-skilled first);
- :func:`plot_delta`   Fig. 6: fine-tuned minus pretrained mean bias per role and layer third.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bertology.pipeline.plotting import new_figure, number_from_one, save_figure, symmetric_limit

from .masks import ROLES
from .summary import COARSE_ROLES, FINE_ROLES, LAYER_GROUPS, roles_per_head
from bertology.pipeline.errors import InputError

_PALETTE = ["#1f77b4", "#aec7e8", "#9edae5", "#ff7f0e", "#7f7f7f", "#d62728", "#ff9896",
            "#2ca02c", "#98df8a", "#9467bd", "#c5b0d5", "#8c564b"]
#: one fixed colour per role, shared by every sieve figure
ROLE_COLORS: dict[str, str] = dict(zip(ROLES, _PALETTE))


def _ecdf(x: np.ndarray, points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite values, thinned to at most `points` steps (the paper's pooled scores run
    to millions of values: examples x heads)."""
    x = np.sort(x[np.isfinite(x)])
    y = np.arange(1, len(x) + 1) / max(len(x), 1)
    if len(x) > points:
        keep = np.unique(np.linspace(0, len(x) - 1, points).round().astype(int))
        x, y = x[keep], y[keep]
    return x, y


def plot_scores(scores: xr.DataArray, tables: Mapping[str, pd.DataFrame], path: str | Path, *, task: str,
                tau: float, alpha: float) -> Path:
    """Fig. 3. scores: per-example scores (example, layer, head, role) of one variant (the fine-tuned one in
    the paper); tables: variant -> sieve.csv, whose p-values are histogrammed."""
    fig, (ax1, ax2) = new_figure(12, 4.6, ncols=2)
    variant = scores.attrs.get("variant", "")
    pooled = []
    for role in [r for r in ROLES if r in scores["role"].values.tolist()]:
        x = np.asarray(scores.sel(role=role).values, dtype=np.float64).ravel()
        pooled.append(x)
        xs, ys = _ecdf(x)
        if len(xs):
            ax1.step(np.maximum(xs, 1e-3), ys, where="post", color=ROLE_COLORS[role], lw=1.2, label=role)
    allx = np.concatenate(pooled) if pooled else np.array([])
    xs, ys = _ecdf(allx)
    if len(xs):
        ax1.step(np.maximum(xs, 1e-3), ys, where="post", color="black", lw=2, label="all roles")
        ax1.axvline(np.nanmean(allx), color="black", ls=":", lw=1, label=f"mean {np.nanmean(allx):.2f}")
    ax1.axvline(tau, color="crimson", ls="--", lw=1.2, label=f"τ = {tau:g}")
    ax1.set_xscale("log")
    ax1.set_xlabel("sieve bias score of an example (n × mean attention on the sieve; log scale)")
    ax1.set_ylabel("cumulative share of (example, head) scores")
    ax1.set_title(f"(a) sieve scores, {variant}: {scores.sizes['example']} examples × "
                  f"{scores.sizes['layer'] * scores.sizes['head']} heads")
    ax1.legend(fontsize=7, ncol=2, loc="upper left")
    bins = np.linspace(0, 1, 41)
    for i, (name, table) in enumerate(tables.items()):
        p = table["p_value"].to_numpy(dtype=float)
        p = p[np.isfinite(p)]
        mid = np.mean((p > alpha) & (p < 1 - alpha)) if len(p) else float("nan")
        ax2.hist(p, bins=bins, histtype="step", lw=1.6, color=["#1f77b4", "#d62728", "#2ca02c"][i % 3],
                 label=f"{name}: {len(p)} tests, {100 * mid:.1f}% in ({alpha:g}, {1 - alpha:g})")
    ax2.axvline(alpha, color="crimson", ls="--", lw=1.2, label=f"α = {alpha:g}")
    ax2.set_yscale("log")
    ax2.set_xlabel("p-value of H0: mean bias ≤ τ (one per head and role)")
    ax2.set_ylabel("number of (head, role) tests (log scale)")
    ax2.set_title("(b) p-values of the one-sided t-tests")
    ax2.legend(fontsize=7)
    fig.suptitle(f"{task}: sieve bias scores and p-values (Pande et al. 2021, Fig. 3)")
    return save_figure(fig, path)


def role_combinations(table: pd.DataFrame, roles: Sequence[str]) -> pd.Series:
    """Number of heads with exactly each combination of `roles` (a boolean MultiIndex over roles, the
    all-False combination = heads with none of them), largest first."""
    wide = roles_per_head(table, roles)
    present = [r for r in roles if r in wide.columns]
    counts = wide.groupby(present).size() if present else pd.Series(dtype=int)
    return counts.sort_values(ascending=False, kind="stable")


def plot_overlap(table: pd.DataFrame, path: str | Path, *, task: str, variant: str,
                 roles: Sequence[str] = COARSE_ROLES) -> Path:
    """Fig. 4 as an UpSet plot with counts: heads with exactly each combination of the coarse roles
    (bars, top), which roles a combination holds (dots, bottom), heads per role (bars, left).

    Drawn with matplotlib directly: upsetplot 0.9 fails under pandas 3 (its in-place fillna on a column
    no longer writes through), so the same layout is reproduced here.
    """
    import matplotlib.pyplot as plt

    present = [r for r in roles if r in set(table["role"])]
    counts = role_combinations(table, present)
    wide = roles_per_head(table, present)
    n_heads = len(wide)
    n_none = int(counts[tuple([False] * len(present))]) if tuple([False] * len(present)) in counts.index else 0
    fig = plt.figure(figsize=(max(7.0, 0.55 * len(counts) + 3.5), 5.2), constrained_layout=True)
    gs = fig.add_gridspec(2, 2, width_ratios=[1.2, max(len(counts), 1) * 0.55], height_ratios=[3, 0.5 * len(present) + 0.3])
    ax_bar = fig.add_subplot(gs[0, 1])
    ax_dots = fig.add_subplot(gs[1, 1], sharex=ax_bar)
    ax_tot = fig.add_subplot(gs[1, 0], sharey=ax_dots)
    x = np.arange(len(counts))
    bars = ax_bar.bar(x, counts.to_numpy(), color="#333333", width=0.6)
    ax_bar.bar_label(bars, fontsize=8, padding=2)
    ax_bar.set_ylabel("heads with exactly\nthese roles")
    ax_bar.set_ylim(0, counts.max() * 1.15 + 1 if len(counts) else 1)
    ax_bar.tick_params(axis="x", bottom=False, labelbottom=False)
    ax_bar.spines[["top", "right"]].set_visible(False)
    for i, combo in enumerate(counts.index):
        combo = combo if isinstance(combo, tuple) else (combo,)
        member = np.asarray(combo, dtype=bool)
        ys = np.arange(len(present))
        ax_dots.scatter(np.full(len(present), i), ys, s=90, color=np.where(member, "#333333", "#dddddd").tolist(),
                        zorder=3)
        if member.sum() > 1:
            ax_dots.plot([i, i], [ys[member].min(), ys[member].max()], color="#333333", lw=2, zorder=2)
    ax_dots.set_yticks(range(len(present)), present)
    ax_dots.set_ylim(-0.6, len(present) - 0.4)
    ax_dots.invert_yaxis()
    ax_dots.set_xticks(x, ["none" if not any(c if isinstance(c, tuple) else (c,)) else "" for c in counts.index],
                       fontsize=8)
    ax_dots.tick_params(axis="y", left=False, labelleft=False)
    for spine in ax_dots.spines.values():
        spine.set_visible(False)
    totals = [int(wide[r].sum()) for r in present]
    tb = ax_tot.barh(range(len(present)), totals, color="#666666", height=0.6)
    ax_tot.bar_label(tb, fontsize=8, padding=2)
    ax_tot.set_xlim(max(totals + [1]) * 1.3, 0)
    ax_tot.set_yticks(range(len(present)), present)
    ax_tot.set_xlabel("heads with the role")
    ax_tot.spines[["top", "left"]].set_visible(False)
    ax_dots.tick_params(axis="x", bottom=False)
    fig.suptitle(f"{task} ({variant}): overlap of head roles (Pande et al. 2021, Fig. 4)\n"
                 f"{n_heads} heads, {n_none} with none of {', '.join(present)}", fontsize=10)
    return save_figure(fig, path)


def _grid_shape(n: int) -> tuple[int, int]:
    cols = int(np.ceil(np.sqrt(n)))
    return int(np.ceil(n / cols)), cols


def role_grid_image(table: pd.DataFrame, roles: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """RGB image (layers x heads cells of role squares) and the (L, H) 0-based head shown at each column.

    Heads of each layer are sorted by their number of roles (descending, ties by head index).
    """
    from matplotlib.colors import to_rgb

    wide = roles_per_head(table, roles)
    L = int(table["layer"].max()) + 1
    H = int(table["head"].max()) + 1
    gr, gc = _grid_shape(len(roles))
    cell_h, cell_w = gr + 1, gc + 1
    img = np.ones((L * cell_h, H * cell_w, 3))
    order = np.zeros((L, H), dtype=int)
    gray = np.array(to_rgb("#d9d9d9"))
    for l in range(L):
        sub = wide.xs(l, level="layer") if l in wide.index.get_level_values("layer") else None
        heads = (sorted(range(H), key=lambda h: (-int(sub.loc[h, "n_roles"]) if sub is not None and h in sub.index else 0, h)))
        order[l] = heads
        for j, h in enumerate(heads):
            y0, x0 = l * cell_h, j * cell_w
            img[y0:y0 + gr, x0:x0 + gc] = gray
            for k, role in enumerate(roles):
                if sub is not None and h in sub.index and role in sub.columns and bool(sub.loc[h, role]):
                    img[y0 + k // gc, x0 + k % gc] = to_rgb(ROLE_COLORS[role])
    return img, order


def plot_roles(tables: Mapping[str, pd.DataFrame], path: str | Path, *, task: str,
               roles: Sequence[str] | None = None) -> Path:
    """Fig. 5: per variant, a layer x head grid; each head a gray cell with one small square per fine role
    (coloured when assigned); heads sorted within each layer, multi-skilled first; head numbers printed."""
    from matplotlib.patches import Patch

    first = next(iter(tables.values()))
    roles = list(roles or [r for r in FINE_ROLES if r in set(first["role"])])
    gr, gc = _grid_shape(len(roles))
    L = int(first["layer"].max()) + 1
    H = int(first["head"].max()) + 1
    panel_w = max(4.5, 0.5 * H * (gc + 1) / 3)
    panel_h = panel_w * (L * (gr + 1)) / (H * (gc + 1))            # the image's aspect ratio
    fig, axes = new_figure(panel_w * len(tables) + 1.0, panel_h + 1.9, ncols=len(tables), squeeze=False)
    for ax, (variant, table) in zip(axes[0], tables.items()):
        img, order = role_grid_image(table, roles)
        ax.imshow(img, interpolation="nearest", aspect="equal")
        number_from_one(ax, "y", L, label="layer", positions=[l * (gr + 1) + (gr - 1) / 2 for l in range(L)])
        ax.set_xticks([])
        ax.set_xlabel("heads, most roles first in each layer\n(small number: the head)", fontsize=9)
        for l in range(L):
            for j in range(H):
                ax.text(j * (gc + 1) + (gc - 1) / 2, l * (gr + 1) + gr - 0.1, str(order[l, j] + 1),
                        ha="center", va="top", fontsize=6, color="#555555")
        ax.set_title(f"{variant}: {int(table['assigned'].sum())} (head, role) assignments", fontsize=9)
    handles = [Patch(color=ROLE_COLORS[r], label=r) for r in roles] + [Patch(color="#d9d9d9", label="no role")]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(f"{task}: roles of every head (Pande et al. 2021, Fig. 5)")
    return save_figure(fig, path)


def plot_delta(delta: pd.DataFrame, path: str | Path, roles: Sequence[str] | None = None) -> Path:
    """Fig. 6: fine-tuned minus pretrained mean bias, per task (panels), role (rows) and layer third
    (columns); one diverging colour scale shared by every panel."""
    tasks = list(dict.fromkeys(delta["task"]))
    if not tasks:
        raise InputError("the sieve delta table is empty: no task has both a pretrained and a fine-tuned sieve.csv")
    roles = list(roles or [r for r in ROLES if r in set(delta["role"])])
    vmax = symmetric_limit(delta["delta"])
    decimals = int(min(max(2, 1 - np.floor(np.log10(vmax))), 6))   # two significant digits of the largest
    fig, axes = new_figure(max(3.0 * len(tasks) + 1.5, 6.0), 0.35 * len(roles) + 2.0, ncols=len(tasks),
                           squeeze=False)
    im = None
    for ax, task in zip(axes[0], tasks):
        sub = delta[delta["task"] == task].pivot(index="role", columns="layer_group", values="delta")
        sub = sub.reindex(index=roles, columns=list(LAYER_GROUPS))
        im = ax.imshow(sub.to_numpy(dtype=float), cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        for (i, j), v in np.ndenumerate(sub.to_numpy(dtype=float)):
            if np.isfinite(v):
                ax.text(j, i, f"{v:+.{decimals}f}", ha="center", va="center", fontsize=7,
                        color="white" if abs(v) > 0.6 * vmax else "black")
            else:
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=7, color="#888888")
        ax.set_xticks(range(len(LAYER_GROUPS)), [f"{g}\nlayers" for g in LAYER_GROUPS], fontsize=8)
        ax.set_yticks(range(len(roles)), roles if ax is axes[0][0] else [""] * len(roles), fontsize=8)
        ax.set_title(task)
    axes[0][0].set_ylabel("role")
    fig.colorbar(im, ax=axes[0].tolist(), label="Δ mean sieve bias (fine-tuned − pretrained)", shrink=0.9)
    fig.suptitle("Change of mean sieve bias with fine-tuning,\nby thirds of the layers (Pande et al. 2021, Fig. 6)")
    return save_figure(fig, path)
