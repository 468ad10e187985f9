"""ALTI-Logit's parts add up to the model's logits on every family (docs/reference.md#alti-logit): pre-norm decoders
(GPT-2, OPT, BLOOM, Llama, Qwen2, Mistral, Gemma) and post-LN encoders (BERT, RoBERTa, DistilBERT, ELECTRA), tiny
random float64 classifiers with every bias and norm parameter random, 1e-5 relative; decision.parquet from the
workflow's own pass (run_views); the pre-norm layouts found from the modules, and the ones left out in one line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertology.norms import logit_views as lv
from bertology.norms import mixparts as mp
from bertology.norms.alti_globenc import alti_globenc_layer
from bertology.norms.alti_logit import DECISION_COLUMNS
from bertology.norms.prenorm import (MixingViewsUnsupported, PreNormCapture, apply_norm, head_candidates, norm_of,
                                     prenorm_parts)
from bertology.norms.values import Capture, transformed_vectors

DECODERS = ("gpt2", "opt", "bloom", "llama", "qwen2", "mistral", "gemma")
ENCODERS = ("bert", "roberta", "distilbert", "electra")


def _config(model_type: str):
    import transformers as T

    common = dict(vocab_size=100, pad_token_id=0, num_labels=3, initializer_range=0.3)
    rms = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
               intermediate_size=64, **common)
    bert = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **common)
    return {
        "gpt2": lambda: T.GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, **common),
        "opt": lambda: T.OPTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_dim=64,
                                   word_embed_proj_dim=32, max_position_embeddings=64, **common),
        "bloom": lambda: T.BloomConfig(n_layer=2, n_head=4, hidden_size=32, **common),
        "llama": lambda: T.LlamaConfig(**rms),
        "qwen2": lambda: T.Qwen2Config(**rms),
        "mistral": lambda: T.MistralConfig(**rms),
        "gemma": lambda: T.GemmaConfig(head_dim=8, **rms),
        "gemma2": lambda: T.Gemma2Config(head_dim=8, **rms),
        "gpt_neox": lambda: T.GPTNeoXConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32,
                                            intermediate_size=64, **common),
        "modernbert": lambda: T.ModernBertConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32,
                                                 intermediate_size=64, cls_token_id=1, sep_token_id=2,
                                                 bos_token_id=1, eos_token_id=2, **common),
        "bert": lambda: T.BertConfig(**bert),
        "roberta": lambda: T.RobertaConfig(**bert, max_position_embeddings=66),
        "electra": lambda: T.ElectraConfig(**bert, embedding_size=16),
        "distilbert": lambda: T.DistilBertConfig(n_layers=2, n_heads=4, dim=32, hidden_dim=64, dropout=0.0,
                                                 attention_dropout=0.0, seq_classif_dropout=0.0, **common),
    }[model_type]()


def tiny(model_type: str):
    """A tiny random float64 classifier of 3 classes, every norm weight 1 + 0.3 N(0, 1) and every bias 0.3 N(0, 1)."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(_config(model_type), attn_implementation="eager")
    model = model.double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn_like(p))
    return model


def inputs():
    """Two rows, the second padded (right): input_ids, attention_mask (2, 9), real lengths."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 100, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 7:], mask[1, 7:] = 0, 0
    return ids, mask, [9, 7]


def _check_sums(d: pd.DataFrame, logits: torch.Tensor) -> None:
    """The example's decision rows add up to its logit of the predicted class, and to predicted minus runner-up."""
    pred, runner = int(d["predicted"].iloc[0]), int(d["runner_up"].iloc[0])
    real = logits.double()
    assert pred == int(real.argmax()) and runner == int(torch.argsort(real, descending=True)[1])
    scale = float(real.abs().max())
    assert abs(d["logit"].sum() - float(real[pred])) < 1e-5 * scale
    assert abs(d["contrast"].sum() - float(real[pred] - real[runner])) < 1e-5 * scale


@pytest.mark.parametrize("model_type", DECODERS)
def test_the_parts_add_up_to_the_logit_on_every_pre_norm_decoder(model_type):
    model = tiny(model_type)
    parts = prenorm_parts(model)
    ids, mask, lengths = inputs()
    with Capture(model, vectors=True) as cap, PreNormCapture(model, parts, head_candidates(model, parts)) as pc, \
            torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        for row, n in enumerate(lengths):
            score, why = lv.score_head(pc, row, n - 1)
            assert why is None
            v = lv.prenorm_views(parts, cap, pc, out.attentions, row, n, n - 1, 10 + row, {}, score)
            d = v.decision
            assert list(d.columns) == DECISION_COLUMNS and (d["example"] == 10 + row).all()
            H, L = model.config.num_attention_heads, model.config.num_hidden_layers
            assert len(d[d["part"] == "head"]) == L * H and set(d["part"]) == {
                "head", "attention_bias", "mlp", "embedding", "final_bias"}
            assert d.loc[d["part"] == "embedding", "layer"].tolist() == [-1]
            assert d.loc[d["part"] == "final_bias", "layer"].tolist() == [L]
            _check_sums(d, out.logits[row])
            assert v.logit_error < 1e-5 and v.alti_error < 1e-9
            assert np.isclose(v.scores["alti"].sum(), 1.0) and v.scores["alti_logit"].shape == (n,)


@pytest.mark.parametrize("model_type", ENCODERS)
def test_the_parts_add_up_to_the_logit_through_post_ln_layers_and_the_pooler(model_type):
    model = tiny(model_type)
    parts, head = mp.layer_parts(model), mp.head_linears(model)
    ids, mask, lengths = inputs()
    with Capture(model, vectors=True) as cap, mp.PartsCapture(model, parts, head) as pc, torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        for row, n in enumerate(lengths):
            alti = torch.stack([alti_globenc_layer(
                out.attentions[p.block.index][row, :, :n, :n],
                transformed_vectors(p.block, cap.values[p.block.index][row:row + 1, :n])[0],
                cap.residual[p.block.index][row, :n], p.block.output.bias, p.block.post_norm,
                cap.sum_out[p.block.index][row, :n], p.final_norm, pc.ln2_in[p.block.index][row, :n])[0]
                for p in parts])
            v = lv.postln_logit(parts, cap, pc, out.attentions, row, n, 0, row, alti, {})
            assert not isinstance(v, str), v
            assert "norm_bias" in set(v.decision["part"])
            _check_sums(v.decision, out.logits[row])


def test_a_part_left_out_breaks_the_sum():
    """The check can fail: the rows without the MLPs do not add up."""
    model = tiny("llama")
    parts = prenorm_parts(model)
    ids, mask, _ = inputs()
    with Capture(model, vectors=True) as cap, PreNormCapture(model, parts, head_candidates(model, parts)) as pc, \
            torch.no_grad():
        out = model(input_ids=ids[:1], attention_mask=mask[:1], output_attentions=True)
        v = lv.prenorm_views(parts, cap, pc, out.attentions, 0, 9, 8, 0, {}, lv.score_head(pc, 0, 8)[0])
    with pytest.raises(AssertionError):
        _check_sums(v.decision[v.decision["part"] != "mlp"], out.logits[0])


@pytest.mark.parametrize("model_type,norm_kind,offset,mlp", [
    ("gpt2", "layernorm", 0.0, "plain"), ("opt", "layernorm", 0.0, "plain"), ("bloom", "layernorm", 0.0, "plain"),
    ("llama", "rmsnorm", 0.0, "gated"), ("gemma", "rmsnorm", 1.0, "gated"), ("modernbert", "layernorm", 0.0,
                                                                             "gated_fused")])
def test_the_pre_norm_parts_are_found_from_the_modules(model_type, norm_kind, offset, mlp):
    model = tiny(model_type)
    parts = prenorm_parts(model)
    assert len(parts.layers) == model.config.num_hidden_layers
    last = parts.layers[-1]
    assert (last.attention_norm.kind, last.attention_norm.offset, last.mlp) == (norm_kind, offset, mlp)
    assert last.gated == (mlp != "plain") and parts.final_norm.kind == norm_kind
    x = torch.randn(3, model.config.hidden_size, dtype=torch.float64)
    for norm in (last.attention_norm, last.mlp_norm, parts.final_norm):
        torch.testing.assert_close(apply_norm(norm, x), norm.module(x), rtol=1e-6, atol=1e-6)
    if model_type == "modernbert":
        assert parts.layers[0].attention_norm.kind == "identity"


@pytest.mark.parametrize("model_type,words", [("gemma2", "sandwich"), ("gpt_neox", "use_parallel_residual"),
                                              ("bert", "post-LN")])
def test_layouts_not_followed_are_said_in_one_line(model_type, words):
    with pytest.raises(MixingViewsUnsupported) as err:
        prenorm_parts(tiny(model_type))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_norm_neither_layernorm_nor_rmsnorm_is_refused():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.eps = torch.nn.Parameter(torch.ones(8)), 1e-6

        def forward(self, x):
            return x * self.weight * 2.0

    with pytest.raises(MixingViewsUnsupported, match="neither LayerNorm nor RMSNorm"):
        norm_of(Scaled(), "a layer's norm")


def test_run_views_gives_alti_and_the_decision_table_on_a_decoder_and_says_why_modernbert_has_no_alti_logit():
    from transformers import AutoModelForSequenceClassification

    from bertology.norms.analysis import run_views
    from bertology.models.loading import prepare_decoder_tokenizer
    from tests.builders.decoders import decoder_config, decoder_tokenizer
    from tests.builders.encoders import model_config, tokenizer_for

    frame = pd.DataFrame({"idx": [4, 7], "text_a": ["the cat sat on the mat .", "a dog barked ."],
                          "text_b": [None, None], "label": [0, 1]})
    tok = decoder_tokenizer("gpt2")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(decoder_config("gpt2", tok, num_labels=3),
                                                           attn_implementation="eager").double().eval()
    tok = prepare_decoder_tokenizer(tok)
    res = run_views(model, tok, frame, max_length=32, batch_size=2, flow_examples=0, mixing_examples=None)
    assert {"alti", "alti_logit"} <= set(res.mixing_views) and {"alti", "alti_logit"} <= set(res.scores["method"])
    assert set(res.decision["example"]) == {4, 7} and list(res.decision.columns) == DECISION_COLUMNS
    assert {"alti", "alti_logit"} <= set(res.layers["method"])
    with torch.no_grad():
        for idx, d in res.decision.groupby("example"):
            text = frame.loc[frame["idx"] == idx, "text_a"].iloc[0]
            _check_sums(d, model(**tok(text, return_tensors="pt")).logits[0])
    enc_tok = tokenizer_for("modernbert")
    torch.manual_seed(0)
    modern = AutoModelForSequenceClassification.from_config(model_config("modernbert", enc_tok),
                                                            attn_implementation="eager").eval()
    res = run_views(modern, enc_tok, frame, max_length=32, batch_size=2, flow_examples=0, mixing_examples=None)
    assert "alti" in set(res.scores["method"]) and "alti_logit" not in set(res.scores["method"])
    assert "no ALTI-Logit: the head after the final norm is 2 linears" in res.mixing_note
    assert res.decision.empty and list(res.decision.columns) == DECISION_COLUMNS
