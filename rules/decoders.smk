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
            **outputs("decoder_probe"),
        params:
            step=step("decoder_probe"),
            files=step_files("decoder_probe"),
        log:
            layout.log("decoder_probe", "{task}"),
        benchmark:
            layout.benchmark("decoder_probe", "{task}")
        threads: step_threads("decoder_probe")
        resources:
            **step_resources("decoder_probe"),
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP

    # seedtag: '' for the first fine-tuning seed, -seedN for each further one
    rule decoder_probe_finetuned:
        input:
            sample=path("sample"),
            finetuned=path("model", init="pretrained"),
            random_finetuned=path("model", init="random") if "random" in INITS else [],
        output:
            **outputs("decoder_probe_finetuned"),
        params:
            step=step("decoder_probe_finetuned"),
            files=step_files("decoder_probe_finetuned"),
        log:
            layout.log("decoder_probe_finetuned", "{task}{seedtag}"),
        benchmark:
            layout.benchmark("decoder_probe_finetuned", "{task}{seedtag}")
        threads: step_threads("decoder_probe_finetuned")
        resources:
            **step_resources("decoder_probe_finetuned"),
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP

    rule decoder_figure:
        input:
            sink=output("decoder_probe", "sink"),
            induction=output("decoder_probe", "induction"),
            # the first fine-tuning seed's (none when nothing is fine-tuned: train.inits [])
            finetuned_sink=output("decoder_probe_finetuned", "sink", seedtag=RUN.values("first_seed")),
            finetuned_induction=output("decoder_probe_finetuned", "induction", seedtag=RUN.values("first_seed")),
        output:
            **outputs("decoder_figure"),
        params:
            step=step("decoder_figure"),
            files=step_files("decoder_figure"),
        log:
            layout.log("decoder_figure", "{task}"),
        benchmark:
            layout.benchmark("decoder_figure", "{task}")
        threads: step_threads("decoder_figure")
        resources:
            **step_resources("decoder_figure"),
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP
