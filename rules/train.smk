# Fine-tuning and Table 1 (Kovaleva et al. 2019, section 4.3).
#   results/models/{task}/{init}{seedtag}/          fine-tuned model (safetensors, tokenizer, config with labels)
#   results/scores/{task}/{variant}{seedtag}.json   pretrained | finetuned | random-finetuned on the validation split
#   results/tables/table1.{csv,md}, table1_tests.csv, results/figures/table1.png
# seedtag: '' for the first seed (train.seed; the model every analysis reads), -seedN for each further
# seed of train.seeds (bertology.pipeline.seedtags).


# The resumable training state (bertology.models.checkpoint) lives in results/checkpoints/{task}/{init}{seedtag}/ (the
# step names it with bertology.pipeline.layout.checkpoint(task, init, seedtag), relative to the working directory). It is deliberately NOT an output of this rule: Snakemake deletes the outputs of a failed or killed job, and with them the
# state that lets the re-run resume (SLURM time limit, SIGTERM). The step deletes it once the model is saved.
rule train_model:
    input:
        train=path("data", split="train"),
        validation=path("data", split="validation"),
    output:
        **outputs("train_model"),
    params:
        step=step("train_model"),
        files=step_files("train_model"),
        **cache_params("train_model"),
    cache: CACHING  # snakemake --cache: shared across working directories (rules/cache.smk)
    log:
        layout.log("train_model", "{task}/{init}{seedtag}"),
    benchmark:
        layout.benchmark("train_model", "{task}/{init}{seedtag}")
    threads: step_threads("train_model")
    resources:
        **step_resources("train_model"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


without_benchmark_when_cached(rules.train_model)


# `pretrained` scores the config's model with a fresh head (no model input, and its config sections
# hold only the head's seed and the evaluation settings); a fine-tuned variant scores its model dir.
rule score:
    input:
        validation=path("data", split="validation"),
        model=_score_model,
    output:
        **outputs("score"),
    wildcard_constraints:
        variant="|".join(SCORE_VARIANTS),
    params:
        step=step("score"),
        files=step_files("score"),
    log:
        layout.log("score", "{task}/{variant}{seedtag}"),
    benchmark:
        layout.benchmark("score", "{task}/{variant}{seedtag}")
    threads: step_threads("score")
    resources:
        **step_resources("score"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP


rule table1:
    input:
        scores=output("score", "score", task=TASK_NAMES, variant=SCORED_VARIANTS, seedtag=SEED_TAGS),
        train=paths("data", task=TASK_NAMES, split="train"),
        validation=paths("data", task=TASK_NAMES, split="validation"),
    output:
        **outputs("table1"),
    params:
        step=step("table1"),
        files=step_files("table1"),
    log:
        layout.log("table1"),
    benchmark:
        layout.benchmark("table1")
    threads: step_threads("table1")
    resources:
        **step_resources("table1"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

