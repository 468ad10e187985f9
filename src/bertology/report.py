"""results/report.html: every table and figure of a run on one self-contained page (images embedded).

Sections follow the papers; each says in a sentence or two what it measures and what the paper found, so
a reader can compare at a glance. Figures are found by their file-name prefix in results/figures/ (one
file per figure and task); anything unclaimed lands in "Other figures", so nothing produced is hidden.
The step that writes the page is :func:`bertology.steps.report.report`.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bertology import __version__


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    measures: str
    paper: str
    figure_prefixes: tuple[str, ...] = ()
    tables: tuple[str, ...] = field(default=())  # globs relative to results/


SECTIONS: tuple[Section, ...] = (
    Section(
        "table1", "Table 1 — what fine-tuning buys",
        "Validation scores of the pretrained encoder with an untrained classification head, the same "
        "architecture fine-tuned from a random (normal) initialisation, and the pretrained encoder fine-tuned.",
        "Kovaleva et al. (Table 1): fine-tuning the pretrained model wins on every task (35.9 points on "
        "average over the untrained head); random initialisation is consistently worse than pretrained.",
        ("table1",), ("tables/table1.csv",)),
    Section(
        "patterns", "Attention patterns (Kovaleva §4.1, Fig. 2)",
        "Every (example, layer, head) map is classified as vertical, diagonal, vertical+diagonal, block or "
        "heterogeneous; bars give the share of each class.",
        "Vertical maps (attention to [CLS]/[SEP]) are the most frequent class; the heterogeneous share, the "
        "only one likely to carry linguistic structure, is at most about half and varies by task.",
        ("patterns",)),
    Section(
        "relations", "Relation-specific heads (Kovaleva §4.2, Fig. 3)",
        "Mean over examples of the maximum attention between linked words (FrameNet: from the frame-evoking "
        "target to its core frame elements, the target's wordpieces being the queries; dependency arcs: from "
        "the dependent to its head), per head; heads above the 99th percentile are flagged.",
        "Only a couple of heads of 144 in BERT-base attend to FrameNet-linked words more than the rest.",
        ("relations",)),
    Section(
        "cosine", "Change with fine-tuning (Kovaleva §4.3, Fig. 5)",
        "Per-head cosine similarity between the pretrained and fine-tuned attention maps of the same "
        "examples (padding excluded), averaged over examples; low values mean fine-tuning changed the head.",
        "The last two layers change most with fine-tuning on every task but QQP: they encode task-specific "
        "features, earlier layers keep the pretrained ones.",
        ("cosine",)),
    Section(
        "features", "Attention to linguistic features (Kovaleva §4.4, Fig. 6)",
        "Per head, the attention a token type receives (summed over queries, divided by length, maximum over "
        "tokens of the type), averaged over examples, for both variants and their difference.",
        "Vertical attention is mostly to [CLS] and [SEP]; heads attending to nouns, objects or negation exist "
        "but their weights are small next to the special tokens, and they come from pre-training.",
        ("features",)),
    Section(
        "cls", "[CLS] attention in the last layer (Kovaleva §4.5, Fig. 7)",
        "The last layer's [CLS] row: how much of its attention each token type gets, per head.",
        "[SEP] gets most of [CLS]'s attention on most tasks; punctuation is attended about as much as [SEP] "
        "on some.",
        ("cls",)),
    Section(
        "ablation", "Disabling heads and layers (Kovaleva §4.6, Figs. 8–9)",
        "The fine-tuned model's score with one head (or one whole layer) attending uniformly to all real "
        "tokens, against the intact baseline, with paired bootstrap intervals and p-values over the same "
        "examples.",
        "Disabling single heads or whole layers often changes little, and some disabled heads or layers "
        "even improve the score; the paper gave no uncertainty, so check which gains survive here.",
        ("ablation",), ("ablation/*/summary.csv",)),
    Section(
        "entropy", "Attention entropy (Clark et al. 2019, §3.3)",
        "Per head, the mean entropy (nats) of its attention rows over every real query of the sampled examples, "
        "and of the [CLS] row alone; the dashed line is uniform attention over the same examples (ln n). Low "
        "entropy = focused attention, near the line = broad, bag-of-words attention.",
        "Some heads in the lower layers attend very broadly (entropy close to uniform, at most about 10% of "
        "the mass on any single word); in the last layer the [CLS] row has high entropy, i.e. broad attention.",
        ("entropy",)),
    Section(
        "parser", "Heads as dependency parsers (Clark et al. 2019, §4.2, Fig. 5)",
        "For each relation and head, how often the word a word attends to most (dep → head), or the word that "
        "attends most to it (head → dep), is its syntactic head; word-level attention sums over the wordpieces "
        "attended to and averages over those attending. Bars: the best head per relation; black marks: the "
        "fixed-offset baseline (always the relation's most common relative position). Gold CoNLL-U trees "
        "(`parser-syntax`, analysis.syntax.conllu and the demo's own trees) and each task's spaCy parses.",
        "No single head does well at syntax overall, but in BERT-base specific heads track specific relations "
        "far above the baseline: direct objects attend to their verbs (head 8-10, 86.8% vs 40.0%), determiners "
        "to their nouns (8-11, 94.3%), prepositions to their objects (9-6, 76.3%), passive auxiliaries to their "
        "verbs (82.5%) and possessives to the head of their NP (80.5%), all learnt without syntactic supervision.",
        ("parser",), ("stats/syntax/best_heads.csv",)),
    Section(
        "norms", "Beyond attention weights: value norms (Kobayashi et al. 2020)",
        "A head passes on alpha_ij f(x_j), not alpha_ij: per layer, the share of the attention each token "
        "category ([CLS], [SEP], punctuation, other) receives by weight (solid) and by norm-weighted attention "
        "alpha ||f(x)|| (dashed), pooled over the layer's heads, for the pretrained and fine-tuned model "
        "(analysis.norms.examples examples). norms.csv adds per-head shares, the mean ||f(x)|| per category and "
        "Spearman correlations of alpha with ||f(x)|| and of ||f(x)|| with token frequency.",
        "In BERT-base the heavy attention to [CLS], [SEP] and punctuation carries vectors of small norm: "
        "by norm-weighted attention their share shrinks sharply (attention to [SEP] is largely a no-op), "
        "alpha and ||f(x)|| are negatively correlated for them, and frequent tokens have smaller ||f(x)||. "
        "This run finds what the dashed lines show against the solid ones: the gap is this model's no-op "
        "attention.",
        ("norms",)),
    Section(
        "mixing", "Context mixing with the residual and LayerNorm (Kobayashi et al. 2021)",
        "Per layer, the share of a token's new representation that comes from the other tokens (context-mixing "
        "ratio, mean ± std over tokens) under attention alone (by weights and by norms), attention + residual, "
        "and attention + residual + LayerNorm (the paper's decomposition of LayerNorm into per-token terms). "
        "Pre-LN models (ModernBERT) have no LayerNorm after the residual and no such line.",
        "In BERT and RoBERTa the residual connection and LayerNorm shrink the mixing far below what attention "
        "alone suggests: most of a token's representation after the attention block is the token itself. "
        "The tables give this run's ratios.",
        ("mixing",), ("stats/*/*/mixing.csv",)),
    Section(
        "faithfulness", "Rollout, flow and how faithful each view is (Abnar & Zuidema 2020)",
        "Token views from the last layer's [CLS]: raw attention (heads averaged), norm-weighted attention, "
        "rollout (attention mixed half and half with the identity, multiplied through the layers) and flow (max "
        "flow from each input token to the top [CLS]). Each is compared, per example of the fine-tuned model, "
        "with two importance scores (drop in the predicted class's probability when the token is masked; "
        "input x gradient) by Spearman's rho: mean over examples with a bootstrap interval "
        "(analysis.flow.examples examples). token_scores.parquet holds every score.",
        "Raw attention of the top layer correlates weakly with both importances; rollout and flow correlate "
        "clearly better (the paper's Table 2). The table below is this run's: whether rollout and flow beat "
        "raw attention here, and by how much given the interval.",
        ("faithfulness",), ("stats/*/finetuned/faithfulness.csv",)),
    Section(
        "pruning", "Head importance and pruning (Michel et al. 2019)",
        "Importance of a head = mean over examples of |dL/dξ|, the loss's sensitivity to a gate ξ on the head's "
        "output (ξ = 1 is the intact model), normalised per layer (l2), computed on the split named in each "
        "map's title (ablation.pruning.importance_split; the paper and the default: training data). Pruning "
        "curves: the validation score with 0, 10, ..., 100% of all heads removed, least important first, "
        "against random orders (mean, ±1 std, range); removal zeroes the head's output (the paper) or, with "
        "ablation.pruning.mode: uniform, makes it attend uniformly (as the disabling above).",
        "Michel et al.: most heads can be removed at test time; pruning by importance, 20% (WMT) and 40% (BERT "
        "on MNLI) of the heads go without a noticeable loss, after which the score drops sharply. Their curves "
        "have no random baseline; the gap to the random orders here says how much the importance order buys.",
        ("importance", "pruning")),
    Section(
        "sieve", "Functional roles of heads (Pande et al. 2021)",
        "Sieve bias: for each role (local, block, delimiter, syntactic, ...) how much more attention a head "
        "puts on the role's tokens than uniform attention would (n × mean attention); a one-sided t-test "
        "over examples (H0: bias ≤ τ) assigns the role.",
        "Most heads are multi-skilled; delimiter heads are common, syntactic heads overlap heavily with local "
        "ones, and fine-tuning changes the bias of the final layers most.",
        ("sieve",), ("stats/sieve_summary.csv", "stats/sieve_delta.csv")),
    # --- issue 26: statistics over fine-tuning seeds (bertology.seedstats; needs two or more train.seeds) ---
    Section(
        "seeds", "Robust across seeds",
        "With train.seeds: [s1, s2, ...] every fine-tuned analysis runs once per seed (the pretrained model once). "
        "findings.csv: which of the papers' findings hold in every seed, in most, in some, in one only or in none "
        "(head identities compared with the first seed's). Stability maps: each per-head statistic's mean and "
        "std over seeds. Role agreement: Fleiss' kappa (seeds as raters) and mean pairwise Jaccard of the heads "
        "each sieve role is assigned to, per layer. stats/{task}/seeds/multibootstrap.csv gives every fine-tuned "
        "- pretrained difference (cosine, sieve bias, disabling delta) with a Multi-Bootstrap interval.",
        "The papers fine-tuned once. McCoy et al. 2020 and Sellam et al. 2022 (The MultiBERTs) show that "
        "fine-tuning and pre-training seeds alone move results, so a per-head finding is a property of fine-tuning "
        "only where it holds in every seed; the Multi-Bootstrap (seeds and examples resampled together) gives "
        "intervals that carry both sources of variance.",
        ("seeds",), ("stats/*/seeds/findings.csv", "stats/*/seeds/role_agreement.csv")),
)


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    title = html.escape(path.stem)
    return (f'<figure><img alt="{title}" src="data:image/png;base64,{data}">'
            f"<figcaption>{title}</figcaption></figure>")


def _table(path: Path, results: Path, max_rows: int = 60) -> str:
    df = pd.read_csv(path)
    more = f"<p class=note>first {max_rows} of {len(df)} rows; full table: <code>{html.escape(str(path.relative_to(results.parent)))}</code></p>" \
        if len(df) > max_rows else f"<p class=note><code>{html.escape(str(path.relative_to(results.parent)))}</code></p>"
    table = df.head(max_rows).to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="tbl")
    return f"<div class=tblwrap>{table}</div>{more}"


def assign_figures(figures: list[Path]) -> dict[str, list[Path]]:
    """Map section key -> its figures (by longest matching prefix); unclaimed ones go to 'other'."""
    out: dict[str, list[Path]] = {s.key: [] for s in SECTIONS}
    out["other"] = []
    prefixes = sorted(((p, s.key) for s in SECTIONS for p in s.figure_prefixes), key=lambda x: -len(x[0]))
    for fig in sorted(figures):
        key = next((k for p, k in prefixes if fig.stem == p or fig.stem.startswith(p + "-")
                    or fig.stem.startswith(p + "_")), "other")
        out[key].append(fig)
    return out


def _md_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_number(text: str) -> bool:
    try:
        float(text.replace("±", "").split()[0]) if text else None
        return bool(text)
    except ValueError:
        return False


def markdown_to_html(text: str) -> str:
    """Pipe tables and paragraphs of a small Markdown file (table1.md) as HTML: tables become <table>s."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p class=note>{html.escape(' '.join(para))}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: "):
            flush()
            head = _md_cells(line)
            i += 2
            body = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                body.append(_md_cells(lines[i]))
                i += 1
            cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
            rows = "".join("<tr>" + "".join(
                f"<td class={'num' if _is_number(c) else 'txt'}>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append(f"<div class=tblwrap><table class='tbl md'><thead><tr>{cells}</tr></thead>"
                       f"<tbody>{rows}</tbody></table></div>")
            continue
        if line.strip():
            para.append(line.strip())
        else:
            flush()
        i += 1
    flush()
    return "".join(out)


def _table1_block(results: Path) -> str:
    md = results / "tables" / "table1.md"
    if md.exists():
        return markdown_to_html(md.read_text())
    return ""


def _explorer_link(results: Path) -> str:
    if (results / "explorer.html").exists():
        return ('<p id=explorer-link>Interactive head explorer (attention maps, per-head statistics, sieve roles): '
                '<a href="explorer.html">explorer.html</a></p>')
    return ""


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#243b53;color:#fff;padding:1.2em 2em}header h1{margin:0 0 .2em}header p{margin:.2em 0;opacity:.9}
nav{padding:.6em 2em;background:#e8eef4;position:sticky;top:0;z-index:2}nav a{margin-right:1em;color:#243b53}
*{box-sizing:border-box}
main{padding:0 2em 3em;max-width:100%}section{margin-top:2em;border-top:1px solid #ddd;padding-top:.5em;max-width:100%}
.why{display:grid;grid-template-columns:1fr 1fr;gap:1em;max-width:1200px}
.why div{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:.6em .9em}
.why b{display:block;font-size:.8em;text-transform:uppercase;letter-spacing:.05em;color:#627d98}
.figs{display:flex;flex-wrap:wrap;gap:1em;margin-top:1em}figure{margin:0;background:#fff;border:1px solid #e3e3e3;
border-radius:6px;padding:.5em;max-width:100%}figure img{max-width:min(560px,100%);width:560px;height:auto}figcaption{font-size:.8em;color:#627d98}
.tblwrap{max-width:100%;overflow-x:auto;margin-top:1em}table.tbl{border-collapse:collapse;font-size:.85em;background:#fff}
table.md th{white-space:normal;max-width:14em;vertical-align:bottom}.tbl td.txt{text-align:left}.tbl th,.tbl td{padding:.25em .6em;
border-bottom:1px solid #eee;text-align:right}.tbl th{background:#f0f4f8}pre.md{background:#fff;border:1px solid #e3e3e3;
padding:.8em;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%}code{overflow-wrap:anywhere}
header a{color:#f0b429}.note{font-size:.8em;color:#627d98}.missing{color:#9b2c2c}
"""


def build_report(results: Path, config: dict) -> str:
    """The HTML text of the report for a results/ directory; config: the validated config (defaults filled,
    :func:`bertology.config.validate_config`), shown in the report."""
    results = Path(results)
    figures = list((results / "figures").glob("*.png"))
    by_section = assign_figures(figures)
    cfg = config
    model = html.escape(str(cfg["model"]))
    tasks = html.escape(", ".join(cfg["tasks"]))
    when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>bertology report — {model}</title>"
             f"<style>{CSS}</style></head><body><header><h1>bertology report</h1>"
             f"<p>model <b>{model}</b> · tasks <b>{tasks}</b> · data <b>{html.escape(str(cfg['data']['source']))}</b>"
             f" · bertology {__version__} · {when}</p>"
             f"<p>Browse every run: <code>mlflow ui --backend-store-uri {html.escape(str(cfg['mlflow']['tracking_uri']))}</code></p>"
             + _explorer_link(results) + "</header><nav>"]
    parts += [f'<a href="#{s.key}">{html.escape(s.title.split(" (")[0].split(" — ")[0])}</a>' for s in SECTIONS]
    parts.append("</nav><main>")
    for s in SECTIONS:
        parts.append(f'<section id="{s.key}"><h2>{html.escape(s.title)}</h2><div class=why>'
                     f"<div><b>What it measures</b>{html.escape(s.measures)}</div>"
                     f"<div><b>What the paper found</b>{html.escape(s.paper)}</div></div>")
        if s.key == "table1":
            parts.append(_table1_block(results))
        for pattern in s.tables:
            for path in sorted(results.glob(pattern)):
                parts.append(_table(path, results))
        figs = by_section[s.key]
        if figs:
            parts.append("<div class=figs>" + "".join(_img(f) for f in figs) + "</div>")
        elif not any(results.glob(p) for p in s.tables):
            parts.append("<p class=missing>No output of this analysis in this run.</p>")
        parts.append("</section>")
    if by_section["other"]:
        parts.append('<section id=other><h2>Other figures</h2><div class=figs>'
                     + "".join(_img(f) for f in by_section["other"]) + "</div></section>")
    parts.append("<section><h2>Configuration</h2><pre class=md>"
                 + html.escape(json.dumps(cfg, indent=2, sort_keys=True)) + "</pre></section></main></body></html>")
    return "".join(parts)
