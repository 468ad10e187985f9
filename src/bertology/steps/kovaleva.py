"""Steps of rules/kovaleva.smk (Kovaleva et al. 2019, sections 4.1-4.5) and the pattern-annotation tools.

- ``kovaleva_cosine``: the pretrained and fine-tuned stores read chunk-aligned once -> cosine.csv and
  features_diff.csv;
- ``framenet_links``: a FrameNet release -> the target -> core frame element links that survive the paper's
  filters (links.parquet; ``analysis.relations.framenet_filter`` reads the distance filter per sentence, the
  paper, or per link) and how many sentences, annotation sets and links survive each filter (counts.json, the
  log and MLflow);
- ``framenet_relations``: a model run on those sentences -> relations_framenet.csv (source = framenet,
  A[target, FE], the paper's direction; and framenet_fe_target, the transpose);
- ``kovaleva_figures`` (Figs. 2, 3, 5, 6, 7 of one task) and ``kovaleva_overview`` (Figs. 2 and 5 across
  tasks): list inputs in the order of ``bertology.pipeline.tasks.STORE_VARIANTS`` (per variant) and of the config's
  ``tasks`` (per task), as the rules expand them;
- ``patterns_sheet`` / ``patterns_train``: a sheet of sampled maps to label, and the pattern CNN trained
  from it (``analysis.patterns.classifier: <the model file>``).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from bertology.steps.context import StepContext
from bertology.pipeline.daskutil import compute_kwargs
from bertology.data import DataError
from bertology.pipeline.io import write_csv, write_json, write_npz, write_parquet
from bertology.pipeline.tasks import annotated_only
from bertology.kovaleva import kovaleva_figures as fig
from bertology.kovaleva import framenet as fn
from bertology.kovaleva import patterns as pat
from bertology.kovaleva import reduce as red
from bertology.stats.moments import Moments, moments_table
from bertology.steps.tables import by_task, by_variant, read_table
from bertology.store import check_block, expected_attrs, open_store, read_words
from bertology.pipeline.seedtags import FINETUNED
from bertology.pipeline.tasks import STORE_VARIANTS

#: attention maps in a label sheet (patterns_sheet), and the seed of their sample
SHEET_MAPS = 400
SHEET_SEED = 0
#: training of the pattern CNN (patterns_train): epochs, input size (maps are resized to SIZE x SIZE), seed
CNN_EPOCHS = 60
CNN_SIZE = 32
CNN_SEED = 0
#: FrameNet sentences per forward pass (framenet_relations); the scores do not depend on it
FRAMENET_BATCH = 32


# --------------------------------------------------------------------------------------------------
# the statistics


def kovaleva_cosine(ctx: StepContext) -> None:
    """The pretrained and fine-tuned stores, read chunk-aligned once -> cosine.csv and the paired fine-tuned minus
    pretrained feature differences, features_diff.csv; with output `examples`, each example's cosine per head
    (cosine (E, L, H), example_idx (E,): what the seed statistics resample). Wildcard `seedtag` ('' or -seedN)
    names the fine-tuning seed of the fine-tuned store (bertology.pipeline.seedtags)."""
    cfg = ctx.config.analysis
    finetuned = f"{FINETUNED}{ctx.wildcards.get('seedtag', '')}"
    part = red.store_pair(ctx.input.pretrained, ctx.input.finetuned, read_words(ctx.input.words),
                          expect=(expected_attrs(ctx.config, ctx.task, "pretrained"),
                                  expected_attrs(ctx.config, ctx.task, finetuned)),
                          compute_kwargs=compute_kwargs(cfg.dask, ctx.threads), negation=cfg.features.negation)
    cosine = moments_table(part.cosine)
    write_csv(cosine, ctx.output.cosine)
    write_csv(annotated_only(ctx.task, "features_diff", red.features_diff_table(part)), ctx.output.features_diff)
    if ctx.output.get("examples") is not None:
        write_npz({"cosine": part.cosine_examples.astype(np.float32), "example_idx": part.example_idx},
                  ctx.output.examples)
    for layer, value in cosine.groupby("layer")["mean"].mean().items():
        ctx.tracker.metric("cosine_by_layer", float(value), step=int(layer))


# --------------------------------------------------------------------------------------------------
# FrameNet


def parse_xml(path: Path) -> ET.Element:
    """The root of one FrameNet XML file; a malformed file (or one whose entities would expand without bound,
    or that names an external entity: the parser refuses both) is one line naming file, line and column."""
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as err:
        line, column = err.position
        what = str(err).rsplit(": line", 1)[0]
        raise DataError(f"{path}:{line}:{column}: not well-formed FrameNet XML ({what}); "
                        f"re-extract the release, or set analysis.relations.framenet: null to skip FrameNet") from None


class FrameCoreTypes(Mapping):
    """frame -> FE name -> coreType of a release's frame/ folder, each frame/<frame>.xml read on first use."""

    def __init__(self, directory: Path):
        self._files = {p.stem: p for p in sorted(Path(directory).glob("*.xml"))}
        self._cache: dict[str, dict[str, str]] = {}

    def __getitem__(self, frame: str) -> dict[str, str]:
        if frame not in self._cache:
            self._cache[frame] = fn.frame_core_types(parse_xml(self._files[frame]))
        return self._cache[frame]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def read_release(directory: str | Path) -> list[fn.Item]:
    """Every annotation set of a FrameNet release directory (fulltext/*.xml + frame/*.xml)."""
    directory = Path(directory)
    fulltext, frames = directory / "fulltext", directory / "frame"
    if not fulltext.is_dir() or not frames.is_dir():
        raise DataError(f"{directory} is not a FrameNet release: it needs fulltext/ and frame/ folders (set "
                        f"analysis.relations.framenet to such a directory, or null to skip FrameNet)")
    documents = ((p.stem, parse_xml(p)) for p in sorted(fulltext.glob("*.xml")))
    items = fn.release_items(documents, FrameCoreTypes(frames))
    if not items:
        raise DataError(f"no annotated sentences under {fulltext}: not a FrameNet release (set "
                        f"analysis.relations.framenet to a release directory, or null to skip FrameNet)")
    return items


def framenet_links(ctx: StepContext) -> None:
    """A FrameNet release, the paper's filters applied -> links.parquet + counts.json (survivors of every filter,
    also in the log and the MLflow run)."""
    mode = ctx.config.analysis.relations.framenet_filter
    kept, counts = fn.filter_items(read_release(ctx.input.release), mode=mode)
    links = fn.links_table(kept)
    write_parquet(links, ctx.output.links)
    write_json(counts, ctx.output.counts)
    ctx.tracker.metrics({f"framenet.{k}": float(v) for k, v in counts.items()})
    ctx.log.info("FrameNet filters (%s): %s", mode, ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"{counts['surviving_sentences']} sentences ({counts['surviving_sets']} frame annotations, "
          f"{counts['links']} links) of {counts['sentences']} survive the filters")


def framenet_relations(ctx: StepContext) -> None:
    """Run a model (the config's, or the rule's fine-tuned `model` input) on the filtered FrameNet sentences ->
    relations rows with source = framenet (A[target, FE], the paper's direction) and framenet_fe_target (the
    transpose), both from one forward pass."""
    import torch

    from bertology.models.loading import load_encoder, load_tokenizer, resolve_model

    torch.set_num_threads(ctx.threads)
    links = pd.read_parquet(ctx.input.links)
    if links.empty:
        raise DataError(f"{ctx.input.links} holds no links: no FrameNet sentence survived the filters")
    name = str(ctx.input.get("model") or ctx.config.model)
    model = load_encoder(name)
    tokenizer = load_tokenizer(resolve_model(name))
    both = fn.link_scores_both(links, tokenizer, model, batch_size=FRAMENET_BATCH,
                               max_length=ctx.config.data.max_length)
    tables = []
    for direction, source in fn.DIRECTIONS.items():
        m = Moments.zeros(both[direction].shape[1:])
        for s in both[direction]:
            m.add(s)
        tables.append(red.relations_table(m, source, ctx.config.analysis.relations.percentile))
        ctx.tracker.metric(f"{source}_flagged_heads", int(tables[-1]["flagged"].sum()))
    write_csv(pd.concat(tables, ignore_index=True), ctx.output.table)
    ctx.tracker.metric("framenet_items", len(both["target_fe"]))


# --------------------------------------------------------------------------------------------------
# figures


def kovaleva_figures(ctx: StepContext) -> None:
    """The per-task figures (Figs. 2, 3, 5, 6, 7); list inputs patterns/features/cls/relations one per variant; the
    cosine figure and the feature differences where the run fine-tunes (inputs cosine, features_diff)."""
    task = ctx.task
    tables = {name: {v: read_table(p) for v, p in by_variant(ctx, name).items()}
              for name in ("patterns", "features", "cls", "relations")}
    fine = "cosine" in ctx.output
    paths = [fig.patterns_figure(tables["patterns"], task, ctx.output.patterns),
             *([fig.cosine_figure(read_table(ctx.input.cosine), task, ctx.output.cosine)] if fine else []),
             fig.features_figure(tables["features"], task, ctx.output.features,
                                 diff_table=read_table(ctx.input.features_diff) if fine else None),
             fig.cls_figure(tables["cls"], task, ctx.output.cls),
             fig.relations_figure(tables["relations"], task, ctx.output.relations)]
    for p in paths:
        ctx.tracker.artifact(p, "figures")


def kovaleva_overview(ctx: StepContext) -> None:
    """Figures across tasks: Fig. 2 (patterns) and Fig. 5 (cosine, one colour scale). Inputs: `pretrained` and
    `finetuned` (patterns.csv, one per task of the config) and `cosine` (one per task); in a run that fine-tunes
    nothing `pretrained` alone, and no cosine figure."""
    variants = [v for v in STORE_VARIANTS if v in ctx.input]
    per_variant = {v: by_task(ctx, v) for v in variants}
    patterns = {t: {v: read_table(per_variant[v][t]) for v in variants} for t in ctx.config.tasks}
    paths = [fig.patterns_tasks_figure(patterns, ctx.output.patterns)]
    if "cosine" in ctx.output:
        cosine = {t: read_table(p) for t, p in by_task(ctx, "cosine").items()}
        paths.append(fig.cosine_tasks_figure(cosine, ctx.output.cosine))
    for p in paths:
        ctx.tracker.artifact(p, "figures")


# --------------------------------------------------------------------------------------------------
# annotating patterns


def patterns_sheet(ctx: StepContext) -> None:
    """A seeded sample of SHEET_MAPS attention maps of a store as PNGs (output `images`, a folder) and the label
    sheet (output `sheet`: task, variant, example, layer, head, image, label) with an empty `label` column."""
    ds = open_store(ctx.input.store)
    sample = pat.sample_maps(ds.sizes["example"], ds.sizes["layer"], ds.sizes["head"], SHEET_MAPS, SHEET_SEED)
    sheet, images = Path(ctx.output.sheet), Path(ctx.output.images)
    images.mkdir(parents=True, exist_ok=True)
    rows = []
    for e in np.unique(sample[:, 0]):  # one read per sampled example
        ex = ds.isel(example=int(e)).load()
        n, idx = int(ex["length"]), int(ex["example_idx"])
        check_block(ex["attention"].values[None], np.array([n]), ds.attrs, where=f"{ctx.input.store} example {e}",
                    padding=False, example_idx=np.array([idx]), store=ctx.input.store)
        for _, layer, head in sample[sample[:, 0] == e]:
            a = ex["attention"].values[layer, head, :n, :n].astype(float)
            image = images / f"ex{idx}_l{layer + 1}_h{head + 1}.png"
            fig.attention_map_figure(a, f"example {idx}, layer {layer + 1}, head {head + 1} (n = {n})", image)
            rows.append({"task": ds.attrs.get("task"), "variant": ds.attrs.get("variant"), "example": idx,
                         "layer": int(layer), "head": int(head), "image": os.path.relpath(image, sheet.parent),
                         "label": ""})
    write_csv(pd.DataFrame(rows), sheet)
    print(f"wrote {len(rows)} maps to {images}; fill the `label` column of {sheet} with one of "
          f"{', '.join(pat.CLASSES)} and run `bertology patterns-train --input labels={sheet} "
          f"--input store={ctx.input.store} --output model=cnn.pt`")


def patterns_train(ctx: StepContext) -> None:
    """Train the 8-conv-layer CNN on a filled-in label sheet (input `labels`; the maps from the `store` inputs)
    -> output `model` (and, if given, `report`: held-out scores as JSON); then set analysis.patterns.classifier
    to the model file."""
    stores = [open_store(p) for p in ctx.input.all("store")]
    maps, labels = pat.labelled_maps(pd.read_csv(ctx.input.labels), stores)
    cnn, report = pat.train_cnn(maps, labels, size=CNN_SIZE, epochs=CNN_EPOCHS, seed=CNN_SEED)
    cnn.save(ctx.output.model)
    if ctx.output.get("report") is not None:
        write_json(report, ctx.output.get("report"))
    ctx.tracker.metrics({k: float(v) for k, v in report.items() if isinstance(v, (int, float))})
    print(json.dumps(report, indent=2))
