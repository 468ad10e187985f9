# Decoder language models only (docs/reference.md#decoders): attention sinks (Gu et al. 2024) and induction,
# previous- and duplicate-token heads (Olsson et al. 2022; TransformerLens) of the pretrained model, its random
# initialisation, every fine-tuned model and every model fine-tuned from random (steps: bertology.steps.decoders).
#   results/stats/{task}/decoder_sink.csv        alpha_0 per example x layer x head (first 64 tokens): the
#                                                pretrained model and its random initialisation
#   results/stats/{task}/decoder_induction.csv   induction / previous / duplicate scores per probe sequence x head
#   results/stats/{task}/pretrained/decoder_heads.csv   their per-head means (the explorer)
#   results/stats/{task}/finetuned{seedtag}/decoder_{sink,induction,heads}.csv   the same for the model fine-tuned
#                                                with each seed (and the one fine-tuned from random with it)
#   results/attention/{task}/probe-{model}.zarr  the induction probe's maps of each model, an attention store
#   results/figures/decoder-{task}.png


if DECODER:

    rule decoder_probe:
        input:
            sample=path("sample"),
        output:
            sink=path("decoder_sink"),
            induction=path("decoder_induction"),
            heads=path("variant_stat", variant="pretrained", file="decoder_heads.csv"),
            probe_pretrained=directory(path("store", variant="probe-pretrained")),
            probe_random_init=directory(path("store", variant="probe-random-init")),
        params:
            step=step("decoder_probe"),
            files=step_files,
        log:
            layout.log("decoder_probe", "{task}"),
        benchmark:
            layout.benchmark("decoder_probe", "{task}")
        threads: 2
        resources:
            mem_mb=6000,
            runtime=60,
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP

    # the model fine-tuned from the random initialisation, where train.inits has it
    _RANDOM_PROBE = ({"probe_random_finetuned": directory(path("store", variant="probe-random-finetuned{seedtag}"))}
                     if "random" in INITS else {})

    # seedtag: '' for the first fine-tuning seed, -seedN for each further one
    rule decoder_probe_finetuned:
        input:
            sample=path("sample"),
            finetuned=path("model", init="pretrained"),
            random_finetuned=path("model", init="random") if "random" in INITS else [],
        output:
            sink=path("variant_stat", variant="finetuned{seedtag}", file="decoder_sink.csv"),
            induction=path("variant_stat", variant="finetuned{seedtag}", file="decoder_induction.csv"),
            heads=path("variant_stat", variant="finetuned{seedtag}", file="decoder_heads.csv"),
            probe_finetuned=directory(path("store", variant="probe-finetuned{seedtag}")),
            **_RANDOM_PROBE,
        params:
            step=step("decoder_probe_finetuned"),
            files=step_files,
        log:
            layout.log("decoder_probe_finetuned", "{task}{seedtag}"),
        benchmark:
            layout.benchmark("decoder_probe_finetuned", "{task}{seedtag}")
        threads: 2
        resources:
            mem_mb=6000,
            runtime=60,
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP

    rule decoder_figure:
        input:
            sink=path("decoder_sink"),
            induction=path("decoder_induction"),
            finetuned_sink=path("variant_stat", variant="finetuned", file="decoder_sink.csv"),
            finetuned_induction=path("variant_stat", variant="finetuned", file="decoder_induction.csv"),
        output:
            figure=path("task_figure", name="decoder"),
        params:
            step=step("decoder_figure"),
            files=step_files,
        log:
            layout.log("decoder_figure", "{task}"),
        benchmark:
            layout.benchmark("decoder_figure", "{task}")
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP

    TARGETS.extend(paths("decoder_sink", task=TASK_NAMES))
    TARGETS.extend(paths("decoder_induction", task=TASK_NAMES))
    TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant=["pretrained", *FINETUNED_VARIANTS],
                         file="decoder_heads.csv"))
    TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant=FINETUNED_VARIANTS,
                         file=["decoder_sink.csv", "decoder_induction.csv"]))
    TARGETS.extend(paths("task_figure", name="decoder", task=TASK_NAMES))
    TARGETS.extend(paths("store", task=TASK_NAMES, variant=["probe-pretrained", "probe-random-init"]))
    TARGETS.extend(paths("store", task=TASK_NAMES, variant=[f"probe-{v}" for v in FINETUNED_VARIANTS]))
