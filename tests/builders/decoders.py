"""Tiny random-weight decoder classifiers with realistic tokenizers, saved as a user gives them (``model: <dir>``).

Tokenizers: a byte-level BPE trained here on demo sentences, in two styles:

- ``"gpt2"``: one special token ``<|endoftext|>`` (bos = eos = unk), no pad token, nothing added around a text
  and nothing between the two texts of a pair (GPT-2's own tokenizer);
- ``"llama"``: ``<unk>``, ``<s>`` (bos, put before every text), ``</s>`` (eos), no pad token (Llama's, Mistral's).

Models: hidden 32, 2 layers, 4 query heads (2 key/value heads where the type has grouped-query attention),
``initializer_range`` 0.3, dropout off, pad token id = eos (what :func:`bertology.models.loading.prepare_decoder_tokenizer`
gives the tokenizer). Any decoder type of :func:`bertology.models.kinds.decoder_model_types` (the decoder compatibility
matrix, tests/test_matrix_decoders.py): :data:`EXTRA` sizes the configs whose keys differ (multi-head latent
attention, hybrid state-space or linear-attention layers, experts), the layer kinds being the type's first two
(a hybrid's attention layer kept where the first two would have none); :func:`decoder_style` gives each type the
tokenizer style of its own.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tests.builders.encoders import demo_corpus

HIDDEN, LAYERS, HEADS, KV_HEADS = 32, 2, 4, 2

# Types whose own tokenizer is a GPT-2-like byte-level BPE that puts nothing around a text (the rest: Llama's
# style, a bos before every text). Qwen's tokenizer classes pad with <|endoftext|>, which only the gpt2 style has.
GPT2_STYLE = {"gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gptj", "bloom", "falcon", "mpt", "olmo", "olmo2",
              "olmo3", "phi", "starcoder2", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5",
              "qwen3_5_text", "stablelm", "persimmon", "gpt_oss", "smollm3", "openai-gpt", "ctrl", "xlnet"}

# Multi-head latent attention (DeepSeek V2/V3, MiniCPM3, A.X K1/K2): low-rank query and key/value, a rotary and
# a non-rotary part of each query/key head (4 + 4), value heads of 8; 4 routed experts of which 2 per token.
_MLA = dict(kv_lora_rank=16, q_lora_rank=16, qk_nope_head_dim=4, qk_rope_head_dim=4, qk_head_dim=8, v_head_dim=8,
            head_dim=4, num_key_value_heads=HEADS, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
            topk_group=1, moe_intermediate_size=16, first_k_dense_replace=1, n_shared_experts=1)
_EXPERTS = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                shared_expert_intermediate_size=16, expert_intermediate_size=16)
_LINEAR = dict(linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4,
               layer_types=["linear_attention", "full_attention"])
_ROPE = {"rope_type": "default", "rope_theta": 10000.0}

# Config keys beyond decoder_config's common sizes, per type.
EXTRA = {
    "deepseek_v2": _MLA, "deepseek_v3": _MLA, "minicpm3": _MLA,
    "axk1": dict(_MLA, mlp_layer_types=["dense", "sparse"]),
    "axk2": dict(_MLA, mlp_layer_types=["dense", "sparse"], index_head_dim=8, index_n_heads=2, index_topk=64,
                 gated_norm_rank=4),
    "gptj": dict(rotary_dim=4),
    "opt": dict(word_embed_proj_dim=HIDDEN, ffn_dim=2 * HIDDEN),
    "ctrl": dict(dff=2 * HIDDEN),
    "falcon": dict(ffn_hidden_size=2 * HIDDEN),
    "gpt_neo": dict(num_layers=LAYERS, num_heads=HEADS, attention_types=[[["global", "local"], 1]],
                    attention_layers=["global", "local"], window_size=8, intermediate_size=2 * HIDDEN,
                    resid_dropout=0.0, embed_dropout=0.0, classifier_dropout=0.0),
    "xlnet": dict(d_model=HIDDEN, n_layer=LAYERS, n_head=HEADS, d_head=HIDDEN // HEADS, d_inner=2 * HIDDEN,
                  dropout=0.0, summary_last_dropout=0.0, mem_len=None),
    "cohere_compass_text": dict(rope_parameters={"full_attention": _ROPE, "sliding_attention": _ROPE}),
    "jamba": dict(_EXPERTS, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                  mamba_dt_rank=4, mamba_d_state=4, use_mamba_kernels=False),
    "zamba": dict(attention_hidden_size=2 * HIDDEN, attention_head_dim=2 * HIDDEN // HEADS, n_mamba_heads=2,
                  mamba_dt_rank=4, mamba_d_state=4, use_mamba_kernels=False, num_key_value_heads=HEADS,
                  layers_block_type=["hybrid", "hybrid"]),  # its attention block is shared: one alone fails the tie
    "zamba2": dict(attention_hidden_size=2 * HIDDEN, attention_head_dim=2 * HIDDEN // HEADS, n_mamba_heads=2,
                   mamba_headdim=32, mamba_d_state=4, chunk_size=8, use_mamba_kernels=False,
                   num_key_value_heads=HEADS, kv_channels=HIDDEN // HEADS, num_query_groups=HEADS,
                   layers_block_type=["linear_attention", "hybrid"], hybrid_layer_ids=[1]),
    "minimax": dict(_EXPERTS, block_size=8),
    "gemma3": dict(mm_tokens_per_image=4),
    "qwen3_5_text": _LINEAR, "qwen3_next": dict(_LINEAR, **_EXPERTS),
    "mixtral": _EXPERTS, "qwen2_moe": _EXPERTS, "qwen3_moe": _EXPERTS, "phimoe": _EXPERTS, "jetmoe": _EXPERTS,
    "hunyuan_v1_moe": _EXPERTS, "gpt_oss": _EXPERTS,
}

# The vision towers of vision-language types (their text model is sized as the text type's own).
VISION = {
    "gemma3": dict(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=1, num_attention_heads=HEADS,
                   image_size=32, patch_size=8),
    "qwen3_5": dict(depth=1, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_heads=HEADS,
                    out_hidden_size=HIDDEN, num_position_embeddings=16),
}


def decoder_style(model_type: str) -> str:
    """The tokenizer style (``"gpt2"`` or ``"llama"``) of `model_type`'s own tokenizer."""
    return "gpt2" if model_type in GPT2_STYLE else "llama"


@lru_cache(maxsize=None)
def _trained_bpe(specials: tuple[str, ...], vocab_size: int) -> str:
    """A byte-level BPE trained on the demo sentences (its JSON, trained once per process)."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(demo_corpus(), vocab_size=vocab_size, min_frequency=1, special_tokens=list(specials),
                            show_progress=False)
    return bpe._tokenizer.to_str()


def decoder_tokenizer(style: str = "gpt2", vocab_size: int = 600, *, eos: bool = True):
    """A byte-level BPE tokenizer of `style` ('gpt2' or 'llama'), without a pad token (and, with eos=False,
    without an eos token either: a batch of it cannot be padded)."""
    from tokenizers import Tokenizer, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>"] if style == "gpt2" else ["<unk>", "<s>", "</s>"]
    bpe = Tokenizer.from_str(_trained_bpe(tuple(specials), vocab_size))
    if style == "gpt2":
        return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>",
                                       eos_token="<|endoftext|>" if eos else None, unk_token="<|endoftext|>",
                                       model_input_names=["input_ids", "attention_mask"])
    if style != "llama":
        raise ValueError(style)
    bos = bpe.token_to_id("<s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>" if eos else None,
                                   unk_token="<unk>", model_input_names=["input_ids", "attention_mask"])


def decoder_config(model_type: str, tok, *, layers: int = LAYERS, num_labels: int = 2):
    """A tiny config of decoder `model_type` sized for `tok`."""
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]()
    eos = tok.eos_token_id if tok.eos_token_id is not None else tok.bos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    text = getattr(config, "text_config", None)
    if text is not None and not hasattr(config, "vocab_size"):   # vision-language: a tiny text model and tower
        config.text_config = decoder_config(text.model_type, tok, layers=layers, num_labels=num_labels)
        for key, value in VISION.get(model_type, {}).items():
            setattr(config.vision_config, key, value)
        for key, value in dict(EXTRA.get(model_type, {}), num_labels=num_labels, pad_token_id=pad).items():
            setattr(config, key, value)
        return config
    sizes = dict(hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=HEADS, intermediate_size=2 * HIDDEN,
                 vocab_size=len(tok), max_position_embeddings=128, initializer_range=0.3, num_labels=num_labels,
                 head_dim=HIDDEN // HEADS, num_key_value_heads=KV_HEADS, attention_dropout=0.0,
                 hidden_dropout=0.0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                 n_embd=HIDDEN, n_layer=layers, n_head=HEADS, n_positions=128, n_inner=2 * HIDDEN,
                 sliding_window=8, pad_token_id=pad, bos_token_id=tok.bos_token_id, eos_token_id=eos)
    extra = EXTRA.get(model_type, {})
    for key, value in {**sizes, **extra}.items():
        if hasattr(config, key) or key in extra:
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001 - a read-only alias (Jamba's layer_types: a property)
                pass
    for key in ("layer_types", "mlp_layer_types"):
        kinds = getattr(config, key, None)
        if isinstance(kinds, list) and len(kinds) != layers:
            try:
                setattr(config, key, kinds[:layers])
            except Exception:  # noqa: BLE001 - a property computed from other keys
                pass
    return config


def build_decoder(model_type: str, path: Path, *, style: str = "gpt2", seed: int = 0, eos: bool = True,
                  trained_pad: bool = False) -> Path:
    """Save a tiny random `model_type` sequence classifier and a `style` tokenizer (no pad token) to `path`.

    The vocabulary covers the tokenizer as `model_type`'s own tokenizer class loads it (Qwen2Tokenizer adds
    ``<|endoftext|>`` as its pad where the trained vocabulary lacks it). trained_pad: the pad token's embedding
    row random, as in a trained model (``padding_idx`` initialises it to zeros; with pad = eos the eos that joins a
    pair would enter the first layer as a zero vector, its value vector 0 where the projection has no bias)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = decoder_tokenizer(style, eos=eos)
    config = decoder_config(model_type, tok)
    path = Path(path)
    tok.save_pretrained(path)
    config.save_pretrained(path)
    loaded = AutoTokenizer.from_pretrained(path)      # the type's own tokenizer class may add a token (a pad)
    if len(loaded) > config.get_text_config().vocab_size:
        config = decoder_config(model_type, loaded)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    if trained_pad:
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
                    module.weight[module.padding_idx].normal_(0.0, 0.3)
    model.save_pretrained(path, safe_serialization=True)
    return path
