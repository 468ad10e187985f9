# Decoder language models only (docs/reference.md#decoders): attention sinks (Gu et al. 2024) and induction,
# previous- and duplicate-token heads (Olsson et al. 2022; TransformerLens) of the pretrained model, its random
# initialisation, the fine-tuned model and the model fine-tuned from random (steps: bertology.steps.decoders).
#   results/stats/{task}/decoder_sink.csv        alpha_0 per example x layer x head (first 64 tokens)
#   results/stats/{task}/decoder_induction.csv   induction / previous / duplicate scores per probe sequence x head
#   results/stats/{task}/{pretrained,finetuned}/decoder_heads.csv   their per-head means (the explorer)
#   results/figures/decoder-{task}.png


if DECODER:

    rule decoder_probe:
        input:
            sample=path("sample"),
            finetuned=path("model", init="pretrained", seedtag=""),
            random_finetuned=path("model", init="random", seedtag="") if "random" in INITS else [],
        output:
            sink=path("decoder_sink"),
            induction=path("decoder_induction"),
            pretrained=path("variant_stat", variant="pretrained", file="decoder_heads.csv"),
            finetuned=path("variant_stat", variant="finetuned", file="decoder_heads.csv"),
            figure=path("task_figure", name="decoder"),
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

    TARGETS.extend(paths("decoder_sink", task=TASK_NAMES))
    TARGETS.extend(paths("decoder_induction", task=TASK_NAMES))
    TARGETS.extend(paths("variant_stat", task=TASK_NAMES, variant=["pretrained", "finetuned"],
                         file="decoder_heads.csv"))
    TARGETS.extend(paths("task_figure", name="decoder", task=TASK_NAMES))
