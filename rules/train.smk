# Fine-tuning and Table 1 (Kovaleva et al. 2019, section 4.3).
#   results/models/{task}/{init}{seedtag}/          fine-tuned model (safetensors, tokenizer, config with labels)
#   results/scores/{task}/{variant}{seedtag}.json   pretrained | finetuned | random-finetuned on the validation split
#   results/tables/table1.{csv,md}, table1_tests.csv, results/figures/table1.png
# seedtag: '' for the first seed (train.seed; the model every analysis reads), -seedN for each further
# seed of train.seeds (bertology.seeds).
from bertology.tasks import SCORE_VARIANTS, VARIANT_INIT

# The variants scored: `pretrained` (untrained head) and the fine-tuned variant of every configured init.
SCORED_VARIANTS = [v for v in SCORE_VARIANTS if v not in VARIANT_INIT or VARIANT_INIT[v] in INITS]


# The resumable training state lives in results/checkpoints/{task}/{init}{seedtag}/ (the step names it with
# bertology.training.checkpoint_dir(task, init, seedtag), relative to the working directory). It is deliberately
# NOT an output of this rule: Snakemake deletes the outputs of a failed or killed job, and with them the
# state that lets the re-run resume (SLURM time limit, SIGTERM). The step deletes it once the model is saved.
rule train_model:
    input:
        train="results/data/{task}/train.parquet",
        validation="results/data/{task}/validation.parquet",
    output:
        model=directory("results/models/{task}/{init}{seedtag}"),
    params:
        step=step("train_model"),
        files=step_files,
    log:
        "results/logs/train_model/{task}/{init}{seedtag}.log",
    benchmark:
        "results/benchmarks/train_model/{task}/{init}{seedtag}.tsv"
    threads: 8  # capped to --cores locally, to max-threads in profiles/slurm
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,  # the `&gpu` line of profiles/slurm asks for one on a GPU partition
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


# `pretrained` scores the config's model with a fresh head (no model input, and its config sections
# hold only the head's seed and the evaluation settings); a fine-tuned variant scores its model dir.
rule score:
    input:
        validation="results/data/{task}/validation.parquet",
        model=_score_model,
    output:
        score="results/scores/{task}/{variant}{seedtag}.json",
    wildcard_constraints:
        variant="|".join(SCORE_VARIANTS),
    params:
        step=step("score"),
        files=step_files,
    log:
        "results/logs/score/{task}/{variant}{seedtag}.log",
    benchmark:
        "results/benchmarks/score/{task}/{variant}{seedtag}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule table1:
    input:
        scores=expand(
            "results/scores/{task}/{variant}{seedtag}.json",
            task=TASK_NAMES,
            variant=SCORED_VARIANTS,
            seedtag=SEED_TAGS,
        ),
        train=expand("results/data/{task}/train.parquet", task=TASK_NAMES),
    output:
        csv="results/tables/table1.csv",
        md="results/tables/table1.md",
        tests="results/tables/table1_tests.csv",
        figure="results/figures/table1.png",
    params:
        step=step("table1"),
        files=step_files,
    log:
        "results/logs/table1/table1.log",
    benchmark:
        "results/benchmarks/table1/table1.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


TARGETS.extend(
    [
        *expand("results/models/{task}/{init}{seedtag}", task=TASK_NAMES, init=INITS, seedtag=SEED_TAGS),
        "results/tables/table1.csv",
        "results/tables/table1.md",
        "results/tables/table1_tests.csv",
        "results/figures/table1.png",
    ]
)
