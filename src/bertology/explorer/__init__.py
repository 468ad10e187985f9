"""results/explorer.html: an interactive head explorer that opens from disk, built from what the pipeline computed.

Two sides of the file system:

- :func:`load_explorer_data` (:mod:`.load`) reads the per-head statistics of the registry's catalogue
  (:mod:`.catalogue`), the sieve tests and per-example scores (:mod:`.sieve`, histograms :mod:`.histograms`), the
  token views of the norm analyses (:mod:`.views`) and a sample of examples (:mod:`.sampling`) from each attention
  store, lazily, one example at a time: a store is never loaded whole (:mod:`.examples`, maps :mod:`.maps`) into
  a plain dict; what it reads under results/ is :mod:`.inputs` (:func:`explorer_inputs` for the rule);
- :func:`render_explorer` (:mod:`.render`) turns that dict into one self-contained HTML page (inline CSS and
  JavaScript from ``assets/``, the data as inline JSON; no server, no network request); :func:`write_explorer`
  (:mod:`.page`) does both and writes the file.

Modules depend one way: cells, inputs (bertology.pipeline.layout, the registry), maps, sampling, histograms <- catalogue,
sieve, views <- examples <- load; load and render (which depends on none of them) <- page. The page reads only
the files it is given as its inputs (the rule's declared inputs; every file under results/ when none are given).

Nothing is recomputed: every number on the page is a CSV value or a store value. Attention maps are quantised
for display only, to uint8 (``round(a * 255)``, error <= 1/510), and each example's maps are zlib-compressed and
base64-encoded (the page inflates them with the browser's ``DecompressionStream``). Statistics keep 6
significant digits.

Views: an overview (layer x head grid of any statistic, pretrained / fine-tuned / difference), a head view (the
head's maps on the sampled examples as a heatmap, a bertviz-style line view and dependency arcs drawn over the
attention, its sieve-score distributions against tau and its roles with p-values) and an example view (every
head's map, pretrained next to fine-tuned, and the example's tokens coloured by each token view of
token_scores.parquet, with the fine-tuned model's importance and the per-example Spearman rho of
faithfulness_examples.csv). The examples are those with token scores first (:func:`pick_examples`), so the
token views shown are never of examples the page left out. Layers and heads are numbered from 1 on the page, as
in the papers; the CSVs and the store count from 0.
"""

from __future__ import annotations

from bertology.explorer.inputs import TOKEN_VIEW_FILES, explorer_inputs
from bertology.explorer.load import DEFAULT_BUDGET_BYTES, DEFAULT_EXAMPLES, load_explorer_data
from bertology.explorer.maps import decode_maps, encode_maps, quantise
from bertology.explorer.page import write_explorer
from bertology.explorer.render import render_explorer, script_json
from bertology.explorer.sampling import pick_examples

__all__ = ["load_explorer_data", "render_explorer", "script_json", "write_explorer", "explorer_inputs",
           "pick_examples", "quantise", "encode_maps", "decode_maps", "DEFAULT_EXAMPLES", "DEFAULT_BUDGET_BYTES",
           "TOKEN_VIEW_FILES"]
