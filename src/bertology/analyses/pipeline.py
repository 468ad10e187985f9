"""The pipeline's own steps, declared once: data, fine-tuning, the attention store and its one read, the two pages
and the tools. Each :class:`bertology.registry.Step` names the config sections its step reads; each
:class:`bertology.registry.Output` the rule that writes it and when the run wants it."""

from __future__ import annotations

from bertology.pipeline.config import EXPECT_SECTIONS
from bertology.pipeline.layout import path, rel
from bertology.registry import ONCE, PER_TASK, Analysis, Output, Step, Want

#: the fine-tuning keys every step that trains reads
TRAIN_KEYS = tuple(f"train.{k}" for k in ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio",
                                          "mixed_precision", "eval_batch_size", "seed", "max_grad_norm",
                                          "checkpoint_steps", "checkpoint_minutes", "method", "lora"))

ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="data",
        steps=(Step("prepare_data", "data", ("data",), f"{path('data')} from data.source", task="whole",
                    mem_mb=4000, runtime=30),),
        outputs=(Output(rel("data"), rule="prepare_data", output="table",
                        wanted=(Want((("task", "tasks"), ("split", "splits"))),)),
                 Output(rel("data_skipped"), rule="prepare_data", output="skipped"))),
    Analysis(
        name="training",
        steps=(Step("train_model", "train", ("model", "data.max_length", *TRAIN_KEYS),
                    "fine-tune a task into results/models/{task}/{init}{seedtag} (resumable)",
                    threads=8, mem_mb=8000, runtime=240, gpu=0),
               Step("score", "train", ("model", "data.max_length", "train.seed", "train.eval_batch_size",
                                       "train.mixed_precision"),
                    "score a variant on the validation split -> results/scores/{task}/{variant}{seedtag}.json",
                    threads=2, mem_mb=4000, runtime=60, gpu=0)),
        outputs=(Output(rel("model"), rule="train_model", output="model", directory=True,
                        wanted=(Want((("task", "tasks"), ("init", "inits"), ("seedtag", "seedtags"))),)),
                 Output(rel("score"), rule="score", output="score"))),
    Analysis(
        name="attention",
        steps=(Step("attention_sample", "attention",
                    ("attention.split", "attention.examples", "data.seed", "data.short_split"),
                    "the seeded attention sample -> results/data/{task}/sample.parquet"),
               Step("annotate_words", "attention", ("model", "data.max_length", "attention.spacy_model",
                                                    "attention.word_models"),
                    "spaCy words of the sample -> results/data/{task}/words.parquet", task="words",
                    mem_mb=3000, runtime=60),
               Step("extract_attention", "attention",
                    ("model", "data.max_length", "data.seed", "attention", "analysis.norms.enabled"),
                    "the attention store results/attention/{task}/{variant}.zarr (resumable), with value norms "
                    "when the norm analyses are on", threads=4, mem_mb=4000, runtime=120, gpu=0),
               # every store analysis of the registry in one read of a store: the store analyses' sections come
               # first (bertology.registry.Registry.steps)
               Step("store_stats", "stores", ("analysis.dask", *EXPECT_SECTIONS),
                    "every store analysis (patterns, features, [CLS], relations, entropy, parser, sieve) from one "
                    "read of a store", task="words", threads=2, mem_mb=6000, runtime=60)),
        outputs=(Output(rel("sample"), rule="attention_sample", output="sample"),
                 Output(rel("words"), rule="annotate_words", output="words", wanted=(PER_TASK,)),
                 Output(rel("store"), rule="extract_attention", output="store", directory=True,
                        wanted=(Want((("task", "tasks"), ("variant", "stores"))),
                                Want((("task", "tasks"), ("variant", "extra_finetuned")), when="seeds"))))),
    Analysis(
        name="pages",
        steps=(Step("report", "report", ("model", "tasks", "data", "train", "attention", "analysis", "ablation",
                                         "mlflow"),
                    f"{path('report')} from every table and figure (and the whole config, shown)"),
               Step("explorer", "report", ("tasks", *EXPECT_SECTIONS),
                    f"{path('explorer')}: browse every head's statistics and maps (offline page)",
                    mem_mb=3000, runtime=20)),
        outputs=(Output(rel("explorer"), rule="explorer", output="page", wanted=(ONCE,)),
                 Output(rel("report"), rule="report", output="report", report="report", wanted=(ONCE,)))),
    Analysis(
        name="tools",
        steps=(Step("validate_config", "admin", (),
                    "print a config file resolved (defaults filled) or what is wrong with it", tracked=False),
               Step("init_mlflow", "admin", ("mlflow",),
                    "create the MLflow store and the invocation's parent run", tracked=False),
               Step("tracking_replay", "admin", (),
                    "send the MLflow records kept under .bertology/pending/ while tracking was down", tracked=False),
               Step("cluster_check", "cluster", (),
                    "do the jobs of the workflow fit the nodes sinfo lists? (dry-runs snakemake with --profile and "
                    "the snakemake arguments after --)", tracked=False, options="check_options", passthrough=True),
               Step("cluster_dask", "cluster", (),
                    "a Dask scheduler here with workers as Slurm jobs (dask-jobqueue), for analysis.dask.scheduler",
                    tracked=False, options="dask_options"))),
)
