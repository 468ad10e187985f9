"""The command line the Snakemake rules call: ``bertology <command> [options]``.

Commands are looked up lazily in COMMANDS ("module:function"); each function takes ``argv`` (the
arguments after the command name) and returns an exit code. Errors of the user's making (bad config,
missing file, wrong store) print one clear message instead of a traceback.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    # name: ("module:function", one-line help)
    "validate-config": ("bertology.cli_foundation:validate_config_cmd", "validate a config file and print it resolved"),
    "init-mlflow": ("bertology.cli_foundation:init_mlflow_cmd", "create the MLflow store and the invocation's parent run"),
    "prepare-data": ("bertology.data:prepare_cmd", "write results/data/{task}/{split}.parquet"),
    "annotate-words": ("bertology.annotate:annotate_cmd", "spaCy words of the attention sample -> results/attention/{task}/words.parquet"),
    "extract-attention": ("bertology.extract:extract_cmd", "the attention store results/attention/{task}/{variant}.zarr (resumable)"),
    "train": ("bertology.train_cli:train_cmd", "fine-tune a task into results/models/{task}/{init} (resumable)"),
    "evaluate": ("bertology.train_cli:evaluate_cmd", "score a variant on the validation split -> results/scores/{task}/{variant}.json"),
    "table1": ("bertology.table1:table1_cmd", "Kovaleva Table 1: table1.csv, table1.md and the figure"),
    "sieve": ("bertology.sieve.cli:sieve_cmd", "Pande sieve bias tests of one store -> results/stats/{task}/{variant}/sieve.csv"),
    "sieve-figures": ("bertology.sieve.cli:figures_cmd", "Pande Figs. 3-5 of one task (scores, role overlap, role grid)"),
    "sieve-delta": ("bertology.sieve.cli:delta_cmd", "Pande Fig. 6: fine-tuned minus pretrained bias -> results/stats/sieve_delta.csv"),
    "sieve-summary": ("bertology.sieve.cli:summary_cmd", "role shares, overlaps, Spearman -> results/stats/sieve_summary.csv"),
    "kovaleva-stats": ("bertology.kovaleva.cli:stats_cmd", "Kovaleva 4.1/4.2/4.4/4.5 from one read of a store -> results/stats/{task}/{variant}/{patterns,features,cls,relations}.csv"),
    "kovaleva-cosine": ("bertology.kovaleva.cli:cosine_cmd", "Kovaleva 4.3: pretrained vs fine-tuned cosine per head -> results/stats/{task}/cosine.csv"),
    "kovaleva-figures": ("bertology.kovaleva.cli:figures_cmd", "Kovaleva Figs. 2, 3, 5, 6, 7 -> results/figures/{patterns,relations,cosine,features,cls}-{task}.png"),
    "kovaleva-overview": ("bertology.kovaleva.cli:overview_cmd", "Kovaleva Figs. 2 and 5 across tasks -> results/figures/{patterns,cosine}-tasks.png"),
    "framenet-links": ("bertology.kovaleva.cli:framenet_links_cmd", "FrameNet release -> filtered sentences and frame-element links (links.parquet, counts.json)"),
    "framenet-relations": ("bertology.kovaleva.cli:framenet_relations_cmd", "run a model on the FrameNet sentences -> relations rows with source=framenet"),
    "patterns-export": ("bertology.kovaleva.cli:patterns_export_cmd", "export a sample of attention maps as PNGs + a label sheet to annotate"),
    "patterns-train": ("bertology.kovaleva.cli:patterns_train_cmd", "train the 8-conv-layer pattern CNN from a label sheet (example, layer, head, label)"),
    "ablation-sweep": ("bertology.ablation:sweep_cmd", "disable every head and every layer alone -> results/ablation/{task}/heads.csv, layers.csv, summary.csv"),
    "ablation-figures": ("bertology.ablation:figures_cmd", "Kovaleva Figs. 8-9 from heads.csv/layers.csv -> results/figures/ablation-{heads,layers}-{task}.png"),
    "report": ("bertology.report:report_cmd", "write results/report.html from everything under results/"),
}

USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, KeyError, ValueError, RuntimeError)


def parse_json(text: str) -> dict:
    """Parse the --params JSON that rules pass (as `{params.x:q}`)."""
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise ValueError(f"--params is not valid JSON ({err}): {text[:200]!r}") from None


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: bertology <command> [options]\n\ncommands:")
        for name, (_, help_) in sorted(COMMANDS.items()):
            print(f"  {name:<22} {help_}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"bertology: unknown command {name!r}; commands: {', '.join(sorted(COMMANDS))}", file=sys.stderr)
        return 2
    module_name, func_name = COMMANDS[name][0].split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    setup_logging()
    try:
        return int(func(rest) or 0)
    except USER_ERRORS as err:
        if "--debug" in rest or logging.getLogger().isEnabledFor(logging.DEBUG):
            raise
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(f"\nbertology {name}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
