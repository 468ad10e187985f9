"""Tiny random-weight decoder classifiers with realistic tokenizers, saved as a user gives them (``model: <dir>``).

Tokenizers: a byte-level BPE trained here on demo sentences, in two styles:

- ``"gpt2"``: one special token ``<|endoftext|>`` (bos = eos = unk), no pad token, nothing added around a text
  and nothing between the two texts of a pair (GPT-2's own tokenizer);
- ``"llama"``: ``<unk>``, ``<s>`` (bos, put before every text), ``</s>`` (eos), no pad token (Llama's, Mistral's).

Models: hidden 32, 2 layers, 4 query heads (2 key/value heads where the type has grouped-query attention),
``initializer_range`` 0.3, dropout off, pad token id = eos (what :func:`bertology.models.prepare_decoder_tokenizer`
gives the tokenizer).
"""

from __future__ import annotations

from pathlib import Path

from tests.builders.encoders import demo_corpus

HIDDEN, LAYERS, HEADS, KV_HEADS = 32, 2, 4, 2


def decoder_tokenizer(style: str = "gpt2", vocab_size: int = 600, *, eos: bool = True):
    """A byte-level BPE tokenizer of `style` ('gpt2' or 'llama'), without a pad token (and, with eos=False,
    without an eos token either: a batch of it cannot be padded)."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>"] if style == "gpt2" else ["<unk>", "<s>", "</s>"]
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(demo_corpus(), vocab_size=vocab_size, min_frequency=1, special_tokens=specials,
                            show_progress=False)
    if style == "gpt2":
        return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                       eos_token="<|endoftext|>" if eos else None, unk_token="<|endoftext|>",
                                       model_input_names=["input_ids", "attention_mask"])
    if style != "llama":
        raise ValueError(style)
    bos = bpe.token_to_id("<s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>" if eos else None,
                                   unk_token="<unk>", model_input_names=["input_ids", "attention_mask"])


def decoder_config(model_type: str, tok, *, layers: int = LAYERS, num_labels: int = 2):
    """A tiny config of decoder `model_type` sized for `tok`."""
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]()
    eos = tok.eos_token_id if tok.eos_token_id is not None else tok.bos_token_id
    sizes = dict(hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=HEADS, intermediate_size=2 * HIDDEN,
                 vocab_size=len(tok), max_position_embeddings=128, initializer_range=0.3, num_labels=num_labels,
                 head_dim=HIDDEN // HEADS, num_key_value_heads=KV_HEADS, attention_dropout=0.0,
                 hidden_dropout=0.0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                 n_embd=HIDDEN, n_layer=layers, n_head=HEADS, n_positions=128, n_inner=2 * HIDDEN,
                 sliding_window=8, pad_token_id=eos, bos_token_id=tok.bos_token_id, eos_token_id=eos)
    for key, value in sizes.items():
        if hasattr(config, key):
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001 - a read-only alias
                pass
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[: config.num_hidden_layers]
    return config


def build_decoder(model_type: str, path: Path, *, style: str = "gpt2", seed: int = 0, eos: bool = True) -> Path:
    """Save a tiny random `model_type` sequence classifier and a `style` tokenizer (no pad token) to `path`."""
    import torch
    from transformers import AutoModelForSequenceClassification

    tok = decoder_tokenizer(style, eos=eos)
    config = decoder_config(model_type, tok)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    path = Path(path)
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path
