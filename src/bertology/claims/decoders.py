"""The decoder claims (Gu et al. 2024 attention sinks; Olsson et al. 2022 induction heads): pure functions of the
decoder probe's tables (stats/{task}/decoder_sink.csv, decoder_induction.csv; docs/reference.md#decoders). Every
function: ``(tables, boot, *, side, null, ...) -> Result``."""

from __future__ import annotations

import pandas as pd

from bertology.claims.common import Tables, mean_above
from bertology.claims.stats import Boot, Result, nan_result
from bertology.decoders.heads import SINK_EPSILON as EPSILON  # Gu et al.'s threshold on alpha_0


def sink_share(tables: Tables, boot: Boot, *, side: str, null: float, variant: str) -> Result:
    """Gu et al. §3: per example, the share of heads with alpha_0 > 0.3 (their Sink_0 with eps 0.3, as a share);
    effect = its mean over the examples (= the sink rate / 100); unit: examples; test: scipy.stats.wilcoxon
    against `null`."""
    units = []
    for t in tables:
        s = t["sink"]
        s = s[s["variant"] == variant]
        if s.empty:
            return nan_result("scipy.stats.wilcoxon", 0, f"decoder_sink.csv has no rows of {variant}")
        units.append((s["alpha_0"] > EPSILON).groupby(s["example"]).mean().rename("share").reset_index())
    return mean_above(units, "share", boot, side=side, null=null)


def induction_gain(tables: Tables, boot: Boot, *, side: str, null: float, variant: str,
                   baseline: str = "random-init") -> Result:
    """Olsson et al.: the best induction head of `variant` (largest mean induction score over the probe's
    sequences) against the best head of `baseline`; per probe sequence, its score minus the baseline's best
    head's score on the same sequence; effect = the mean difference; unit: sequences (paired);
    test: scipy.stats.wilcoxon."""
    units, heads = [], ()
    for t in tables:
        i = t["induction"]
        a, b = i[i["variant"] == variant], i[i["variant"] == baseline]
        if a.empty or b.empty:
            return nan_result("scipy.stats.wilcoxon", 0, f"decoder_induction.csv lacks {variant} or {baseline}")
        best_a = a.groupby(["layer", "head"])["induction"].mean().idxmax()
        best_b = b.groupby(["layer", "head"])["induction"].mean().idxmax()
        sa = a[(a["layer"] == best_a[0]) & (a["head"] == best_a[1])].set_index("sequence")["induction"]
        sb = b[(b["layer"] == best_b[0]) & (b["head"] == best_b[1])].set_index("sequence")["induction"]
        units.append(pd.DataFrame({"gain": (sa - sb).sort_index().to_numpy()}))
        heads = ((int(best_a[0]), int(best_a[1])),)
    return mean_above(units, "gain", boot, side=side, null=null, heads=heads)
