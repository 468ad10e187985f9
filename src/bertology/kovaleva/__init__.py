"""Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", sections 4.1-4.5 over the attention stores.

Modules: ``patterns`` (4.1), ``relations`` and ``framenet`` (4.2), ``cosine`` (4.3), ``features`` (4.4 and
4.5), ``reduce`` (the Kovaleva kernel of the one-pass reduction, :mod:`bertology.attention.onepass`, and the pair
reduction of two stores) and ``figures``; the steps of rules/kovaleva.smk are in ``bertology.steps.kovaleva``.

Outputs (per-head CSVs are long and tidy; ``layer``/``head`` are 0-based ints; every mean has ``std``
(ddof=1) and ``n`` beside it):

* ``results/stats/{task}/{variant}/patterns.csv`` — layer, head, class, fraction, n (maps classified).
  The overall fractions over all heads are the rows with ``layer == head == -1``.
* ``.../features.csv`` — layer, head, feature, mean, std, n (features: cls sep noun verb pronoun subject
  object negation; n = examples that contain the feature; negation words from
  ``analysis.features.negation``: ``paper``, the footnote-6 list, or ``extended``).
* ``.../cls.csv`` — the last layer's [CLS] row, the same features plus punctuation.
* ``.../relations.csv`` — layer, head, source (dependency | framenet | framenet_fe_target), mean, std, n,
  flagged (mean above ``analysis.relations.percentile`` of that source's head means). ``framenet`` is
  A[target, frame element] (the target's wordpieces are the queries, the paper's direction);
  ``framenet_fe_target`` the transpose, for comparison.
* ``results/stats/{task}/cosine.csv`` — per-head cosine of pretrained vs fine-tuned maps, padding excluded.
* ``results/stats/{task}/features_diff.csv`` — paired per-example fine-tuned minus pretrained feature scores.
* ``results/data/framenet/links.parquet`` and ``counts.json`` — FrameNet links and how many sentences,
  annotation sets and links survive each of the paper's filters (``analysis.relations.framenet_filter``:
  ``sentence``, the paper, or ``link``).
* figures ``results/figures/{patterns,relations,cosine,features,cls}-{task}.png`` (Figs. 2, 3, 5, 6, 7) and
  ``{patterns,cosine}-tasks.png`` (Figs. 2 and 5 across tasks, one colour scale).

Reads: ``store_stats`` reads a store once for patterns, features, cls and dependency relations (and every other
store analysis of the registry, :mod:`bertology.analyses`);
``kovaleva_cosine`` reads the pretrained and fine-tuned stores once more, chunk-aligned, for cosine and the
paired feature differences (a pairing of two stores cannot come from the per-variant pass; keeping the
passes apart means changing the pattern classifier or the percentile never re-reads both stores).

Annotating patterns: ``snakemake results/patterns/{task}/labels.csv`` (rule ``patterns_sheet``) writes PNGs of
a seeded sample of maps and the sheet (columns task, variant, example, layer, head, image, label); fill
``label`` with one of the five classes, then ``bertology patterns-train --input labels=.../labels.csv --input
store=results/attention/{task}/finetuned.zarr --output model=cnn.pt`` and set
``analysis.patterns.classifier: cnn.pt``.
"""
