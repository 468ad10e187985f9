"""Commands of rules/kovaleva.smk: ``kovaleva-stats``, ``kovaleva-cosine``, ``kovaleva-figures``,
``framenet-links``, ``framenet-relations``, and the annotation tools ``patterns-export`` / ``patterns-train``."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bertology.io import write_csv as _write_csv

log = logging.getLogger(__name__)


def _analysis(params: dict) -> dict:
    """The analysis sections (patterns, relations, dask) from --params, with their defaults."""
    a = params.get("analysis", params)
    return {"patterns": {"classifier": "rule", **(a.get("patterns") or {})},
            "relations": {"framenet": None, "percentile": 99, **(a.get("relations") or {})},
            "dask": {"scheduler": None, **(a.get("dask") or {})}}


def _compute_kwargs(dask_cfg: dict, threads: int | None) -> dict[str, Any]:
    from bertology.daskutil import compute_kwargs

    return compute_kwargs(dask_cfg, threads)


def _read(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run `snakemake {path}` first")
    return pd.read_csv(path)


def stats_cmd(argv: list[str]) -> int:
    """One read of a store -> patterns.csv, features.csv, cls.csv, relations.csv (dependency [+ framenet])."""
    from bertology.cli import parse_json
    from bertology.kovaleva import reduce as red
    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology kovaleva-stats", description=stats_cmd.__doc__)
    ap.add_argument("--store", required=True, help="results/attention/{task}/{variant}.zarr")
    ap.add_argument("--words", required=True, help="results/attention/{task}/words.parquet")
    ap.add_argument("--task", default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--params", default="{}", help="analysis.{patterns,relations,dask} as JSON")
    ap.add_argument("--framenet", default=None, help="relations_framenet.csv rows to add to relations.csv")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--outdir", required=True, help="results/stats/{task}/{variant}")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    cfg = _analysis(parse_json(args.params))
    with job_run("kovaleva_stats", task=args.task, variant=args.variant, params={"analysis": cfg}):
        import mlflow

        t0 = time.perf_counter()
        part = red.store_stats(args.store, args.words, classifier=cfg["patterns"]["classifier"],
                               scheduler=_compute_kwargs(cfg["dask"], args.threads))
        seconds = time.perf_counter() - t0
        layers, heads = part.dependency.total.shape
        out = Path(args.outdir)
        patterns = red.patterns_table(part.patterns)
        features = red.features_table(part)
        cls = red.cls_table(part, layers)
        relations = red.relations_table(part.dependency, "dependency", cfg["relations"]["percentile"])
        if args.framenet:
            relations = pd.concat([_read(args.framenet), relations], ignore_index=True)
        for name, df in (("patterns", patterns), ("features", features), ("cls", cls), ("relations", relations)):
            _write_csv(df, out / f"{name}.csv")
        mlflow.log_metric("examples", part.examples)
        mlflow.log_metric("seconds", seconds)
        for _, row in patterns[patterns["layer"] == -1].iterrows():
            mlflow.log_metric(f"pattern_fraction.{row['class'].replace('+', '_')}", float(row["fraction"]))
        for f in ("cls", "sep"):
            sub = features[features["feature"] == f].groupby("layer")["mean"].mean()
            for layer, value in sub.items():
                mlflow.log_metric(f"feature_by_layer.{f}", float(value), step=int(layer))
        log.info("%s: %d examples, %d x %d heads in %.1f s", args.store, part.examples, layers, heads, seconds)
    return 0


def cosine_cmd(argv: list[str]) -> int:
    """The pretrained and fine-tuned stores of a task, read chunk-aligned once -> cosine.csv (and the paired
    fine-tuned minus pretrained feature differences, features_diff.csv)."""
    from bertology.cli import parse_json
    from bertology.kovaleva import reduce as red
    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology kovaleva-cosine", description=cosine_cmd.__doc__)
    ap.add_argument("--pretrained", required=True)
    ap.add_argument("--finetuned", required=True)
    ap.add_argument("--words", default=None, help="words.parquet (for the paired feature differences)")
    ap.add_argument("--features-diff", default=None, help="results/stats/{task}/features_diff.csv")
    ap.add_argument("--task", default=None)
    ap.add_argument("--params", default="{}", help="analysis.dask as JSON (or the analysis section)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--output", required=True, help="results/stats/{task}/cosine.csv")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    cfg = _analysis(parse_json(args.params))
    with job_run("kovaleva_cosine", task=args.task, params={"analysis": {"dask": cfg["dask"]}}):
        import mlflow

        if args.features_diff and not args.words:
            raise ValueError("--features-diff needs --words (results/attention/{task}/words.parquet)")
        part = red.store_pair(args.pretrained, args.finetuned, args.words,
                              scheduler=_compute_kwargs(cfg["dask"], args.threads))
        df = red.moments_table(part.cosine)
        _write_csv(df, args.output)
        if args.features_diff:
            _write_csv(red.features_diff_table(part), args.features_diff)
        for layer, value in df.groupby("layer")["mean"].mean().items():
            mlflow.log_metric("cosine_by_layer", float(value), step=int(layer))
    return 0


def figures_cmd(argv: list[str]) -> int:
    """The per-task figures (Figs. 2, 3, 5, 6, 7) from results/stats/{task}; logged to MLflow."""
    from bertology.kovaleva import figures as fig
    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology kovaleva-figures", description=figures_cmd.__doc__)
    ap.add_argument("--task", required=True)
    ap.add_argument("--stats-dir", required=True, help="results/stats/{task}")
    ap.add_argument("--outdir", default="results/figures")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    stats, out, task = Path(args.stats_dir), Path(args.outdir), args.task
    tables = {name: {v: _read(stats / v / f"{name}.csv") for v in fig.VARIANTS}
              for name in ("patterns", "features", "cls", "relations")}
    with job_run("kovaleva_figures", task=task):
        import mlflow

        paths = [fig.patterns_figure(tables["patterns"], task, out / f"patterns-{task}.png"),
                 fig.cosine_figure(_read(stats / "cosine.csv"), task, out / f"cosine-{task}.png"),
                 fig.features_figure(tables["features"], task, out / f"features-{task}.png",
                                     diff_table=_read(stats / "features_diff.csv")
                                     if (stats / "features_diff.csv").exists() else None),
                 fig.cls_figure(tables["cls"], task, out / f"cls-{task}.png"),
                 fig.relations_figure(tables["relations"], task, out / f"relations-{task}.png")]
        for p in paths:
            mlflow.log_artifact(str(p), artifact_path="figures")
    return 0


def overview_cmd(argv: list[str]) -> int:
    """Figures across tasks: patterns-tasks.png (Fig. 2) and cosine-tasks.png (Fig. 5, one colour scale)."""
    from bertology.kovaleva import figures as fig
    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology kovaleva-overview", description=overview_cmd.__doc__)
    ap.add_argument("--tasks", required=True, nargs="+")
    ap.add_argument("--stats-dir", default="results/stats")
    ap.add_argument("--outdir", default="results/figures")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    stats, out = Path(args.stats_dir), Path(args.outdir)
    patterns = {t: {v: _read(stats / t / v / "patterns.csv") for v in fig.VARIANTS} for t in args.tasks}
    cosine = {t: _read(stats / t / "cosine.csv") for t in args.tasks}
    with job_run("kovaleva_overview"):
        import mlflow

        for p in (fig.patterns_tasks_figure(patterns, out / "patterns-tasks.png"),
                  fig.cosine_tasks_figure(cosine, out / "cosine-tasks.png")):
            mlflow.log_artifact(str(p), artifact_path="figures")
    return 0


def framenet_links_cmd(argv: list[str]) -> int:
    """Parse a FrameNet release, apply the paper's filters -> links.parquet + counts.json."""
    from bertology.kovaleva import framenet as fn

    ap = argparse.ArgumentParser(prog="bertology framenet-links", description=framenet_links_cmd.__doc__)
    ap.add_argument("--framenet", required=True, help="FrameNet release directory (fulltext/, frame/)")
    ap.add_argument("--output", required=True, help="results/stats/framenet/links.parquet")
    ap.add_argument("--counts", required=True, help="results/stats/framenet/counts.json")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    from bertology.tracking import job_run

    with job_run("framenet_links", params={"framenet": args.framenet}):
        import mlflow

        kept, counts = fn.filter_items(fn.read_release(args.framenet))
        links = fn.links_table(kept)
        counts["links"] = int(len(links))
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        links.to_parquet(args.output, index=False)
        Path(args.counts).write_text(json.dumps(counts, indent=2) + "\n")
        mlflow.log_metrics({f"framenet.{k}": float(v) for k, v in counts.items()})
    log.info("FrameNet filters: %s", counts)
    print(f"{counts['surviving_sentences']} sentences ({counts['surviving_sets']} frame annotations, "
          f"{counts['links']} links) of {counts['sentences']} survive the filters")
    return 0


def framenet_relations_cmd(argv: list[str]) -> int:
    """Run a model on the filtered FrameNet sentences -> relations rows with source = framenet."""
    from bertology.cli import parse_json
    from bertology.kovaleva import framenet as fn
    from bertology.kovaleva import reduce as red
    from bertology.tracking import job_run

    ap = argparse.ArgumentParser(prog="bertology framenet-relations", description=framenet_relations_cmd.__doc__)
    ap.add_argument("--links", required=True)
    ap.add_argument("--model", required=True, help="model name/dir (pretrained) or results/models/{task}/pretrained")
    ap.add_argument("--task", default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--params", default="{}", help="analysis.relations (+ max_length) as JSON")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--output", required=True)
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    params = parse_json(args.params)
    percentile = float(params.get("percentile", 99))
    with job_run("framenet_relations", task=args.task, variant=args.variant, params=params):
        import mlflow
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        links = pd.read_parquet(args.links)
        if links.empty:
            raise ValueError(f"{args.links} holds no links: no FrameNet sentence survived the filters")
        tokenizer, model = fn.load_encoder(args.model)
        scores = fn.link_scores(links, tokenizer, model, batch_size=args.batch_size,
                                max_length=int(params.get("max_length", 128)))
        m = red.Moments.zeros(scores.shape[1:])
        for s in scores:
            m.add(s)
        df = red.relations_table(m, "framenet", percentile)
        _write_csv(df, args.output)
        mlflow.log_metric("framenet_items", len(scores))
        mlflow.log_metric("framenet_flagged_heads", int(df["flagged"].sum()))
    return 0


def patterns_export_cmd(argv: list[str]) -> int:
    """Export a seeded sample of attention maps as PNGs plus labels.csv (empty `label` column) to annotate."""
    from bertology import plotting
    from bertology.kovaleva import patterns as pat
    from bertology.kovaleva.reduce import open_attention_store

    ap = argparse.ArgumentParser(prog="bertology patterns-export", description=patterns_export_cmd.__doc__)
    ap.add_argument("--store", required=True)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--outdir", required=True, help="folder for images/ and labels.csv")
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    ds = open_attention_store(args.store)
    sample = pat.sample_maps(ds.sizes["example"], ds.sizes["layer"], ds.sizes["head"], args.count, args.seed)
    out = Path(args.outdir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for e in np.unique(sample[:, 0]):  # one read per sampled example
        ex = ds.isel(example=int(e)).load()
        n = int(ex["length"])
        ids = ex["input_ids"].values[:n]
        for _, layer, head in sample[sample[:, 0] == e]:
            a = ex["attention"].values[layer, head, :n, :n].astype(float)
            idx = int(ex["example_idx"])
            name = f"images/ex{idx}_l{layer + 1}_h{head + 1}.png"
            fig, ax = plotting.new_figure(4.2, 4.0)
            im = ax.imshow(a, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
            ax.set_title(f"example {idx}, layer {layer + 1}, head {head + 1} (n = {n})", fontsize=9)
            fig.colorbar(im, ax=ax)
            plotting.save_figure(fig, out / name)
            rows.append({"task": ds.attrs.get("task"), "variant": ds.attrs.get("variant"), "example": idx,
                         "layer": int(layer), "head": int(head), "image": name, "label": ""})
        del ids
    sheet = pd.DataFrame(rows)
    _write_csv(sheet, out / "labels.csv")
    print(f"wrote {len(sheet)} maps to {out}; fill the `label` column with one of {', '.join(pat.CLASSES)} and run "
          f"`bertology patterns-train --labels {out / 'labels.csv'} --store {args.store} --output model.pt`")
    return 0


def load_labelled_maps(labels: pd.DataFrame, stores: list[str]) -> tuple[list[np.ndarray], list[str]]:
    """Maps (n x n) for label rows `example, layer, head, label` (+ optional task/variant picking the store)."""
    from bertology.kovaleva.reduce import open_attention_store

    need = {"example", "layer", "head", "label"}
    if not need <= set(labels.columns):
        raise ValueError(f"the label file needs columns {sorted(need)}; got {list(labels.columns)}")
    labels = labels[labels["label"].notna() & (labels["label"].astype(str).str.strip() != "")]
    if labels.empty:
        raise ValueError("the label file has no filled-in `label`: annotate the sheet first")
    opened = [open_attention_store(s) for s in stores]
    maps, names = [], []
    for _, row in labels.iterrows():
        candidates = [d for d in opened if all(str(d.attrs.get(k)) == str(row[k]) for k in ("task", "variant")
                                                if k in row and pd.notna(row[k]))]
        if not candidates:
            raise ValueError(f"no --store for task={row.get('task')} variant={row.get('variant')} (label row {row.name})")
        ds = candidates[0]
        pos = np.flatnonzero(ds["example_idx"].values == int(row["example"]))
        if pos.size == 0:
            raise ValueError(f"example {row['example']} is not in the store {ds.attrs.get('task')}/{ds.attrs.get('variant')}")
        ex = ds.isel(example=int(pos[0]))
        n = int(ex["length"])
        maps.append(ex["attention"].values[int(row["layer"]), int(row["head"]), :n, :n].astype(np.float32))
        names.append(str(row["label"]).strip())
    return maps, names


def patterns_train_cmd(argv: list[str]) -> int:
    """Train the 8-conv-layer CNN on a filled-in label sheet; set analysis.patterns.classifier to its output."""
    from bertology.kovaleva import patterns as pat

    ap = argparse.ArgumentParser(prog="bertology patterns-train", description=patterns_train_cmd.__doc__)
    ap.add_argument("--labels", required=True, help="CSV with example, layer, head, label (+ task, variant)")
    ap.add_argument("--store", required=True, action="append", help="attention store(s) the maps come from")
    ap.add_argument("--output", required=True, help="the model file (.pt)")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    maps, labels = load_labelled_maps(pd.read_csv(args.labels), args.store)
    cnn, report = pat.train_cnn(maps, labels, size=args.size, epochs=args.epochs, seed=args.seed)
    cnn.save(args.output)
    Path(str(args.output) + ".json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0
