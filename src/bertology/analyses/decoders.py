"""Decoder language models' heads: attention sinks (Gu et al. 2024, *When Attention Sink Emerges in Language
Models*) and induction, previous-token and duplicate-token heads (Olsson et al. 2022, *In-context Learning and
Induction Heads*; TransformerLens' head detector), declared once. The tables come from the decoder probe
(``rules/decoders.smk``, :mod:`bertology.steps.decoders`), which runs only when the model is a decoder; Gu et al.'s
alpha_0 of every model, encoder or decoder, also comes from the one read of its stores (the analysis ``sinks``,
:class:`bertology.attention.sinks.SinkKernel`)."""

from __future__ import annotations

from bertology.claims import decoders as claims_decoders
from bertology.pipeline.layout import rel
from bertology.registry import MOMENTS, PER_TASK, Analysis, Claim, Output, Section, Statistic, Step, Table, Want, figure, variant_table

SINK = ("variant", "example", "layer", "head", "alpha_0", "n")
#: sinks.csv of a store: one row per example x layer x head
STORE_SINK = ("example_idx", "layer", "head", "alpha_0", "n")
INDUCTION = ("variant", "sequence", "layer", "head", "induction_stripe", "induction", "previous_token",
             "duplicate_token")
HEADS = ("layer", "head", "alpha_0", "share_sink", "induction_stripe", "induction", "previous_token",
         "duplicate_token")
#: the per-head table of each model (the explorer's grid)
DECODER_HEADS = variant_table("decoder_heads.csv")
#: Gu et al.'s alpha_0 of every store, encoder or decoder (the one read of a store): per example, and per head
SINKS = variant_table("sinks.csv")
SINK_HEADS = variant_table("sink_heads.csv")
#: a fine-tuning seed's models (the fine-tuned one, and the one fine-tuned from random with that seed)
FINETUNED = (("variant", "finetuned{seedtag}"),)
PER_FINETUNED = Want((("task", "tasks"), ("variant", "finetuned")))
#: the papers' own sentences (their abstracts)
GU = ("Language Models (LMs) assign significant attention to the first token, even if it is not semantically "
      "important, which is known as attention sink.")
OLSSON = ("We find that induction heads develop at precisely the same point as a sudden sharp increase in in-context "
          "learning ability, visible as a bump in the training loss.")


def _table(what: str, variant: str) -> str:
    """Where the probe's `what` ("sink" or "induction") rows of `variant` are: the task's table for the pretrained
    model (and its random initialisation), each fine-tuning seed's own for the fine-tuned models."""
    return rel(f"decoder_{what}") if variant == "pretrained" else variant_table(f"decoder_{what}.csv")


def _with_reference(what: str, variant: str) -> tuple[tuple[str, str, str], ...]:
    """A claim's inputs: `variant`'s table, and for a fine-tuned model the task's table as ``reference`` (the
    pretrained model and the random initialisation it is compared with)."""
    inputs = ((what, _table(what, variant), ""),)
    return inputs if variant == "pretrained" else inputs + (("reference", rel(f"decoder_{what}"), ""),)


def _sink(variant: str) -> Claim:
    return Claim(f"gu_sink_first_token{'' if variant == 'pretrained' else '_finetuned'}", "Gu et al. 2024",
                 "abstract; 3 (Sink_1^eps, eps 0.3)",
                 "Most heads of a trained decoder put more than 0.3 of their attention on the first token "
                 f"(the {variant} model).",
                 f"decoder_sink.csv ({variant}): per example, the share of heads with alpha_0 > 0.3; mean over examples",
                 claims_decoders.sink_share, (("sink", _table("sink", variant), ""),), null=0.5, unit="examples",
                 variant=variant, params=(("variant", variant),), anchor="decoders", figure="decoder",
                 paper_value="attention sinks in every LM they test, small ones included",
                 sentence=GU, models="decoder")


def _induction(variant: str) -> Claim:
    return Claim(f"olsson_induction{'' if variant == 'pretrained' else '_finetuned'}", "Olsson et al. 2022",
                 "abstract; Argument 1",
                 f"The {variant} model has an induction head: its best head scores higher on repeated random tokens "
                 "than any head of the same architecture at random initialisation.",
                 f"decoder_induction.csv: induction score of the {variant} model's best head minus the random "
                 "initialisation's best head, per probe sequence",
                 claims_decoders.induction_gain, _with_reference("induction", variant), unit="sequences",
                 variant=variant, params=(("variant", variant),), anchor="decoders", figure="decoder",
                 paper_value="induction heads form in a phase change early in training",
                 sentence=OLSSON, models="decoder")


def _kept(what: str) -> Claim:
    sink = what == "sink"
    return Claim(f"{'gu_sink' if sink else 'olsson_induction'}_kept_finetuned",
                 "Gu et al. 2024" if sink else "Olsson et al. 2022",
                 "abstract; fine-tuning: ours (the paper compares no fine-tuned model)",
                 ("Fine-tuning on the task keeps the attention sink: the fine-tuned model's share of sink heads "
                  f"is at most {claims_decoders.KEPT_MARGIN} below the pretrained model's on the same examples."
                  if sink else
                  "Fine-tuning on the task keeps the induction head: the fine-tuned model's best head scores at "
                  f"most {claims_decoders.KEPT_MARGIN} below the pretrained model's best head on the same sequences."),
                 ("decoder_sink.csv: per example, the fine-tuned minus the pretrained share of heads with "
                  "alpha_0 > 0.3" if sink else
                  "decoder_induction.csv: per probe sequence, the fine-tuned model's best head's induction score "
                  "minus the pretrained model's best head's"),
                 claims_decoders.sink_kept if sink else claims_decoders.induction_kept,
                 _with_reference("sink" if sink else "induction", "finetuned"),
                 null=-claims_decoders.KEPT_MARGIN, unit="examples" if sink else "sequences", variant="finetuned",
                 anchor="decoders", figure="decoder",
                 paper_value="sinks and induction heads form in pre-training; no fine-tuned figure",
                 sentence=GU if sink else OLSSON, models="decoder")


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        name="decoders",
        claims=(_sink("pretrained"), _sink("finetuned"), _induction("pretrained"), _induction("finetuned"),
                _kept("sink"), _kept("induction")),
        steps=(Step("decoder_probe", "decoders", ("model", "data.max_length", "data.seed", "train.seed"),
                    "a decoder's sink and induction probe of one task, the pretrained model and its random "
                    "initialisation -> decoder_sink.csv, decoder_induction.csv, pretrained/decoder_heads.csv",
                    threads=2, mem_mb=6000, runtime=60),
               Step("decoder_probe_finetuned", "decoders", ("model", "data.max_length", "data.seed"),
                    "the same probe of one fine-tuning seed's models -> finetuned{seedtag}/"
                    "decoder_{sink,induction,heads}.csv", threads=2, mem_mb=6000, runtime=60),
               Step("decoder_figure", "decoders", (),
                    "alpha_0 and the induction score per head, one column per model of the probe")),
        tables=(Table(_table("sink", "pretrained"), SINK, when="decoder", rule="decoder_probe", output="sink",
                      wanted=(PER_TASK,)),
                Table(_table("induction", "pretrained"), INDUCTION, when="decoder", rule="decoder_probe",
                      output="induction", wanted=(PER_TASK,)),
                Table(_table("sink", "finetuned"), SINK, when="decoder", rule="decoder_probe_finetuned", output="sink",
                      fill=FINETUNED, wanted=(PER_FINETUNED,)),
                Table(_table("induction", "finetuned"), INDUCTION, when="decoder", rule="decoder_probe_finetuned",
                      output="induction", fill=FINETUNED, wanted=(PER_FINETUNED,)),
                Table(DECODER_HEADS, HEADS, when="decoder", rule="decoder_probe_finetuned", output="heads",
                      fill=FINETUNED,
                      wanted=(Want((("task", "tasks"), ("variant", "pretrained_and_finetuned"))),))),
        outputs=(Output(DECODER_HEADS, rule="decoder_probe", output="heads", fill=(("variant", "pretrained"),),
                        when="decoder"),
                 *(Output(rel("store"), rule="decoder_probe", output=f"probe_{model.replace('-', '_')}",
                          fill=(("variant", f"probe-{model}"),), directory=True, when="decoder",
                          wanted=(Want((("task", "tasks"), ("variant", (f"probe-{model}",)))),))
                   for model in ("pretrained", "random-init")),
                 Output(rel("store"), rule="decoder_probe_finetuned", output="probe_finetuned",
                        fill=(("variant", "probe-finetuned{seedtag}"),), directory=True, when="decoder",
                        wanted=(Want((("task", "tasks"), ("variant", "probe_finetuned"))),)),
                 # the model fine-tuned from the random initialisation, where train.inits has it
                 Output(rel("store"), rule="decoder_probe_finetuned", output="probe_random_finetuned",
                        fill=(("variant", "probe-random-finetuned{seedtag}"),), directory=True, when="decoder",
                        only="random"),
                 figure("decoder_figure", "figure", "decoder", when="decoder", reported=False)),
        section=Section(
            key="decoders", paper="Gu et al. 2024; Olsson et al. 2022",
            title="Decoders: attention sinks and induction heads (Gu et al. 2024; Olsson et al. 2022)",
            measures="For a decoder model only. Attention sink: per head, alpha_0 = mean over the query positions t "
            "of A[t, 0], the attention the first token receives, on the first 64 tokens of each sampled example "
            "(Gu et al.'s definition; a head 'has a sink' when alpha_0 > 0.3). Induction, previous-token and "
            "duplicate-token heads: TransformerLens' detection scores (the share of a head's attention on the "
            "pattern's query-key pairs) on 10 sequences of a BOS token and 50 random tokens repeated twice. Each "
            "for the pretrained model, its random initialisation (untrained), the fine-tuned model and the model "
            "fine-tuned from random.",
            finding="Trained decoders put most of the attention of most heads on the first token, whatever it is "
            "(an attention sink), and it is absent at random initialisation (Gu et al.); trained models of two or "
            "more layers have induction heads, which attend from a token to the token after its earlier "
            "occurrence (Olsson et al.).",
            figure_prefixes=("decoder",),
            tables=(DECODER_HEADS,)),
        statistics=(
            Statistic(id="decoder_sink", group="Decoders (Gu et al.; Olsson et al.)", label="sink alpha_0",
                      desc="Mean attention to the first token (alpha_0, Gu et al.) over the first 64 tokens of the "
                      "sampled examples; > 0.3 is a sink.", table=DECODER_HEADS,
                      column="alpha_0", optional=True),
            Statistic(id="decoder_induction", group="Decoders (Gu et al.; Olsson et al.)", label="induction score",
                      desc="TransformerLens' induction score on random tokens repeated twice: the share of the head's "
                      "attention on the token after the current token's earlier occurrence.",
                      table=DECODER_HEADS, column="induction", optional=True),
            Statistic(id="decoder_previous", group="Decoders (Gu et al.; Olsson et al.)", label="previous-token score",
                      desc="TransformerLens' previous-token score on the induction probe.",
                      table=DECODER_HEADS, column="previous_token", optional=True),
            Statistic(id="decoder_duplicate", group="Decoders (Gu et al.; Olsson et al.)",
                      label="duplicate-token score",
                      desc="TransformerLens' duplicate-token score on the induction probe.",
                      table=DECODER_HEADS, column="duplicate_token", optional=True),
        )),
    Analysis(
        name="sinks", kernel="bertology.attention.sinks:SinkKernel",
        tables=(Table(SINKS, STORE_SINK, output="sinks"),
                Table(SINK_HEADS, MOMENTS, output="sink_heads")),
        section=Section(
            key="sinks", paper="Gu et al. 2024",
            title="Attention sink of every model (Gu et al. 2024)",
            measures="For every model, encoder or decoder, on the attention store (whole examples): per example "
            "and head, alpha_0 = the mean over the example's real query rows t (t = 0 included, padding excluded) "
            "of A[t, 0], the attention to the first token whatever it is ([CLS], <s>, BOS or a word); per head its "
            "mean over examples (alpha_0) and the share of examples with alpha_0 > 0.3 (over).",
            finding="Language models put much of the attention of most heads on the first token, whatever it is: "
            "Gu et al.'s sink rate (the share of sequence x layer x head with alpha_0 > 0.3) is high in every "
            "trained decoder they test.",
            tables=(SINK_HEADS,)),
        statistics=(
            Statistic(id="sinks", group="Attention sink (Gu et al.)", label="first token: {k}",
                      desc="Gu et al.'s alpha_0 on whole examples: the mean over real query rows of the attention to "
                      "position 0 (alpha_0), or the share of examples with alpha_0 > 0.3 (over); mean over examples.",
                      table=SINK_HEADS, key=("feature",)),
        )),
)
