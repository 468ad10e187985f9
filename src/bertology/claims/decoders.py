"""The decoder claims (Gu et al. 2024 attention sinks; Olsson et al. 2022 induction heads): pure functions of the
decoder probe's tables (stats/{task}/decoder_sink.csv, decoder_induction.csv; docs/reference.md#decoders). Every
function: ``(tables, boot, *, side, null, ...) -> Result``. A claim about a fine-tuned model gets, per fine-tuning
seed, that seed's table (``sink`` / ``induction``) and the task's table of the pretrained model and its random
initialisation as ``reference``: :func:`rows` joins them."""

from __future__ import annotations

import pandas as pd

from bertology.claims.common import Tables, mean_above
from bertology.claims.bootstrap import Boot, Result, nan_result
from bertology.decoders.heads import SINK_EPSILON as EPSILON  # Gu et al.'s threshold on alpha_0

#: how much of a pretrained decoder's sink share or best induction score fine-tuning may lose and still "keep" it
#: (ours: the papers compare no fine-tuned model; the null of the two `*_kept_finetuned` claims is -KEPT_MARGIN)
KEPT_MARGIN = 0.05


def rows(t, what: str) -> pd.DataFrame:
    """One seed's `what` rows ("sink" or "induction") with its ``reference`` rows (where given) after them."""
    frames = [t[what]] + ([t["reference"]] if "reference" in t else [])
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def sink_share(tables: Tables, boot: Boot, *, side: str, null: float, variant: str) -> Result:
    """Gu et al. §3: per example, the share of heads with alpha_0 > 0.3 (their Sink_0 with eps 0.3, as a share);
    effect = its mean over the examples (= the sink rate / 100); unit: examples; test: scipy.stats.wilcoxon
    against `null`."""
    units = []
    for t in tables:
        shares = _shares(rows(t, "sink"), variant)
        if shares.empty:
            return nan_result("scipy.stats.wilcoxon", 0, f"decoder_sink.csv has no rows of {variant}")
        units.append(shares.rename("share").reset_index())
    return mean_above(units, "share", boot, side=side, null=null)


def _shares(sink: pd.DataFrame, variant: str) -> pd.Series:
    """Per example, the share of heads with alpha_0 > EPSILON of one model's rows (index: example)."""
    s = sink[sink["variant"] == variant]
    return (s["alpha_0"] > EPSILON).groupby(s["example"]).mean()


def sink_kept(tables: Tables, boot: Boot, *, side: str, null: float, variant: str = "finetuned",
              baseline: str = "pretrained") -> Result:
    """Whether fine-tuning keeps the sink: per example, the share of heads with alpha_0 > 0.3 in `variant` minus
    that share in `baseline` on the same example (paired); effect = the mean difference; unit: examples;
    test: scipy.stats.wilcoxon against `null` (-KEPT_MARGIN: the fine-tuned model loses less than that)."""
    units = []
    for t in tables:
        s = rows(t, "sink")
        a, b = _shares(s, variant), _shares(s, baseline)
        if a.empty or b.empty:
            return nan_result("scipy.stats.wilcoxon", 0, f"decoder_sink.csv lacks {variant} or {baseline}")
        both = a.index.intersection(b.index)
        units.append(pd.DataFrame({"change": (a[both] - b[both]).to_numpy()}))
    return mean_above(units, "change", boot, side=side, null=null)


def _best_head_scores(induction: pd.DataFrame, variant: str) -> tuple[tuple[int, int], pd.Series]:
    """One model's best induction head (largest mean score) and its score per probe sequence."""
    own = induction[induction["variant"] == variant]
    best = own.groupby(["layer", "head"])["induction"].mean().idxmax()
    scores = own[(own["layer"] == best[0]) & (own["head"] == best[1])].set_index("sequence")["induction"]
    return (int(best[0]), int(best[1])), scores.sort_index()


def induction_kept(tables: Tables, boot: Boot, *, side: str, null: float, variant: str = "finetuned",
                   baseline: str = "pretrained") -> Result:
    """Whether fine-tuning keeps the induction head: :func:`induction_gain` of `variant` against `baseline` (each
    model's own best head, paired over the same sequences), tested against `null` (-KEPT_MARGIN)."""
    return induction_gain(tables, boot, side=side, null=null, variant=variant, baseline=baseline)


def induction_gain(tables: Tables, boot: Boot, *, side: str, null: float, variant: str,
                   baseline: str = "random-init") -> Result:
    """Olsson et al.: the best induction head of `variant` (largest mean induction score over the probe's
    sequences) against the best head of `baseline`; per probe sequence, its score minus the baseline's best
    head's score on the same sequence; effect = the mean difference; unit: sequences (paired);
    test: scipy.stats.wilcoxon."""
    units, heads = [], ()
    for t in tables:
        i = rows(t, "induction")
        if (i["variant"] == variant).sum() == 0 or (i["variant"] == baseline).sum() == 0:
            return nan_result("scipy.stats.wilcoxon", 0, f"decoder_induction.csv lacks {variant} or {baseline}")
        head, a = _best_head_scores(i, variant)
        _, b = _best_head_scores(i, baseline)
        units.append(pd.DataFrame({"gain": (a - b).to_numpy()}))
        heads = (head,)
    return mean_above(units, "gain", boot, side=side, null=null, heads=heads)
