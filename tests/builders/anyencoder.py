"""A tiny random sequence classifier of ANY encoder type of transformers (the compatibility matrix,
tests/test_matrix.py), with a tokenizer of the model's own class trained here on demo sentences:

- WordPiece (BertTokenizer, MPNetTokenizer, ...: a ``vocab`` dict): the embedded MiniLM's uncased vocabulary,
  plus the class's own special tokens where they are not in it (MPNet's ``<s>``, ``</s>``, ...);
- byte-level BPE (RobertaTokenizer, DebertaTokenizer, ...: ``vocab`` + ``merges``): trained with ``tokenizers``;
- SentencePiece/Unigram (AlbertTokenizer, XLMRobertaTokenizer, ...: ``vocab`` as (piece, score) pairs):
  trained with ``tokenizers``' UnigramTrainer.

Sizes: hidden 32, 2 layers (ALBERT 5, sharing one attention module), 4 heads, intermediate 64, dropout off,
``initializer_range`` 0.3 (peaked attention, so disabling a head visibly changes the logits).
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from pathlib import Path

from tests.builders.encoders import demo_corpus, bpe_tokenizer, model_config, wordpiece_tokenizer

HIDDEN, LAYERS, HEADS = 32, 2, 4
ALBERT_LAYERS = 5       # one attention module for all: a head disabled in layer 3 must stay intact in layer 4
PROJECT_BUILDERS = ("bert", "distilbert", "roberta", "electra", "modernbert", "deberta-v2")  # tests/builders/encoders.py

# model types whose classifier cannot be built from a tiny text-only config at all, and why
NOT_BUILDABLE = {
    "modernvbert": "a vision-language model (ModernVBERT): its classifier takes images, not only token ids",
    "ultravbert": "a vision-language model: its classifier takes images, not only token ids",
    "perceiver": "Perceiver reads bytes through a latent array: no token-to-token self-attention",
}


def tokenizer_class(model_type: str):
    """The model's own tokenizer class (transformers' TOKENIZER_MAPPING_NAMES), or None."""
    import transformers
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    name = TOKENIZER_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if name else None
    return None if cls is None or cls.__name__ == "TokenizersBackend" else cls


def tokenizer_kind(cls) -> str:
    """'bpe', 'unigram' or 'wordpiece', from the tokenizer class's constructor (merges; (piece, score) pairs)."""
    params = inspect.signature(cls.__init__).parameters
    if "merges" in params:
        return "bpe"
    annotation = str(params["vocab"].annotation) if "vocab" in params else ""
    return "unigram" if "tuple[str, float]" in annotation or "list" in annotation else "wordpiece"


def _defaults(cls) -> dict[str, str]:
    params = inspect.signature(cls.__init__).parameters
    return {k: p.default for k, p in params.items() if k.endswith("_token") and isinstance(p.default, str)}


@lru_cache(maxsize=None)
def _unigram_vocab(specials: tuple[str, ...], size: int = 400) -> list[tuple[str, float]]:
    import json

    from tokenizers import SentencePieceUnigramTokenizer

    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(demo_corpus(), vocab_size=size, special_tokens=list(specials), unk_token=specials[0],
                           show_progress=False)
    return [tuple(x) for x in json.loads(sp._tokenizer.to_str())["model"]["vocab"]]


def any_tokenizer(model_type: str):
    """A tokenizer of `model_type`'s own class and kind, trained or loaded here (no download); (tok, kind)."""
    if model_type in ("roberta", "modernbert"):
        return bpe_tokenizer("roberta" if model_type == "roberta" else "cls"), "bpe"
    cls = tokenizer_class(model_type)
    if cls is None:
        return wordpiece_tokenizer(), "wordpiece"
    kind = tokenizer_kind(cls)
    specials = _defaults(cls)
    extra = {} if "pad_token" in specials else {"pad_token": "<pad>"}    # Reformer's has none: padded batches
    specials = {**specials, **extra}
    if kind == "bpe":
        import json

        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer(add_prefix_space=True)
        bpe.train_from_iterator(demo_corpus(), vocab_size=600, min_frequency=1,
                                special_tokens=list(dict.fromkeys(specials.values())), show_progress=False)
        model = json.loads(bpe._tokenizer.to_str())["model"]
        return cls(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]], **extra), kind
    if kind == "unigram":
        unk = specials.get("unk_token", "<unk>")
        ordered = tuple(dict.fromkeys([unk, *specials.values()]))
        return cls(vocab=_unigram_vocab(ordered), **extra), kind
    base = wordpiece_tokenizer()
    vocab = dict(base.get_vocab())
    for token in specials.values():
        vocab.setdefault(token, len(vocab))
    try:
        return cls(vocab=vocab, **extra), kind
    except (TypeError, ImportError):   # EsmTokenizer takes a file; RoFormer's needs rjieba: the plain WordPiece
        return base, kind


def tiny_config(model_type: str, tok, *, layers: int = LAYERS):
    """A tiny config of `model_type` sized for `tok` (the project's own for the six of encoders.py)."""
    from transformers import CONFIG_MAPPING

    if model_type in PROJECT_BUILDERS:
        return model_config(model_type, tok, layers=layers)
    config = CONFIG_MAPPING[model_type]()
    sizes = dict(hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=HEADS, intermediate_size=2 * HIDDEN,
                 vocab_size=len(tok), max_position_embeddings=130, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0, initializer_range=0.3, num_labels=2,
                 pad_token_id=tok.pad_token_id, type_vocab_size=2, embedding_size=HIDDEN // 2,
                 classifier_dropout=0.0, dropout=0.0, attention_dropout=0.0, layer_norm_eps=1e-12,
                 head_dim=HIDDEN // HEADS, num_key_value_heads=HEADS, entity_vocab_size=16, entity_emb_size=16)
    extra = {
        "albert": dict(num_hidden_layers=ALBERT_LAYERS, num_hidden_groups=1, inner_group_num=1),  # one module
        "mobilebert": dict(embedding_size=HIDDEN, true_hidden_size=HIDDEN, intra_bottleneck_size=HIDDEN,
                           use_bottleneck=False, num_feedforward_networks=1),
        "squeezebert": dict(embedding_size=HIDDEN, q_groups=1, k_groups=1, v_groups=1, post_attention_groups=1,
                            intermediate_groups=1, output_groups=1),
        "funnel": dict(block_sizes=[1, 1], block_repeats=[1, 1], d_model=HIDDEN, n_head=HEADS, d_head=8,
                       d_inner=2 * HIDDEN, num_decoder_layers=1),
        "deberta": dict(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
                        type_vocab_size=2, pooler_hidden_size=HIDDEN, pooler_dropout=0.0),
        "reformer": dict(axial_pos_embds=False, attn_layers=["local", "lsh"], attention_head_size=8,
                         feed_forward_size=2 * HIDDEN, local_attn_chunk_length=8, lsh_attn_chunk_length=8),
        "longformer": dict(attention_window=[4] * layers, max_position_embeddings=132),
        "big_bird": dict(attention_type="block_sparse", block_size=2, num_random_blocks=1),
        "xlm": dict(emb_dim=HIDDEN, n_layers=layers, n_heads=HEADS, n_words=len(tok)),
        "flaubert": dict(emb_dim=HIDDEN, n_layers=layers, n_heads=HEADS, n_words=len(tok)),
        "esmc": dict(d_model=HIDDEN, n_heads=HEADS, n_layers=layers, num_key_value_heads=HEADS),
        "eurobert": dict(head_dim=HIDDEN // HEADS, num_key_value_heads=HEADS),
        "ultrabert": dict(head_dim=HIDDEN // HEADS, num_key_value_heads=HEADS),
    }.get(model_type, {})
    for key, value in {**sizes, **extra}.items():
        if hasattr(config, key) or key in extra:
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001 - a read-only alias
                pass
    if isinstance(getattr(config, "layer_types", None), list):      # per-layer attention kinds: the first ones
        config.layer_types = config.layer_types[: config.num_hidden_layers]
    for attr in ("bos_token_id", "cls_token_id"):
        if hasattr(config, attr) and tok.cls_token_id is not None:
            setattr(config, attr, tok.cls_token_id)
    for attr in ("eos_token_id", "sep_token_id"):
        if hasattr(config, attr) and tok.sep_token_id is not None:
            setattr(config, attr, tok.sep_token_id)
    return config


def build_any(model_type: str, path: Path, *, seed: int = 0) -> tuple[Path, str]:
    """Save a tiny random `model_type` classifier and its tokenizer to `path`; (path, tokenizer kind)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    if model_type in NOT_BUILDABLE:
        raise ValueError(NOT_BUILDABLE[model_type])
    tok, kind = any_tokenizer(model_type)
    config = tiny_config(model_type, tok)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    path = Path(path)
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path, kind
