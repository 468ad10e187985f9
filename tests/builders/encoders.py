"""Tiny random-weight sequence classifiers of every architecture bertology supports, with real tokenizers.

BERT, DistilBERT, ELECTRA and DeBERTa-v2 get the embedded model's uncased WordPiece vocabulary; RoBERTa
(``<s> a </s></s> b </s>``, all-zero token types) and ModernBERT (``[CLS] a [SEP] b [SEP]``, no token types,
sliding-window layers) get a byte-level BPE trained here with ``tokenizers`` on demo sentences. Each is
saved with ``save_pretrained`` (safetensors), as a user would give it with ``model: <dir>``.
"""

from __future__ import annotations

from pathlib import Path

ARCHITECTURES = ("bert", "distilbert", "roberta", "electra", "modernbert", "deberta-v2")


def demo_corpus() -> list[str]:
    from bertology.demo import generate

    texts: list[str] = []
    for task in ("sst2", "mrpc", "rte", "qnli"):
        df = generate(task, "train", 120, seed=0)
        texts += df["text_a"].astype(str).tolist()
        if "text_b" in df:
            texts += df["text_b"].dropna().astype(str).tolist()
    return texts


def wordpiece_tokenizer():
    """The embedded MiniLM's uncased WordPiece tokenizer ([CLS] a [SEP] b [SEP], token types 0/1)."""
    from transformers import AutoTokenizer

    from bertology.models.loading import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("minilm-l6"), local_files_only=True)


def bpe_tokenizer(style: str, vocab_size: int = 600):
    """A byte-level BPE trained on demo sentences; style 'roberta' (<s>..</s></s>..</s>) or 'cls' ([CLS]..[SEP]).

    Neither style gives token types: RoBERTa's are all 0, ModernBERT's tokenizer returns none. The 'roberta'
    style is transformers' RobertaTokenizer on the trained vocabulary and merges.
    """
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    if style == "roberta":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    elif style == "cls":
        specials = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]
    else:
        raise ValueError(style)
    bpe = ByteLevelBPETokenizer(add_prefix_space=True, trim_offsets=True)
    bpe.train_from_iterator(demo_corpus(), vocab_size=vocab_size, min_frequency=1, special_tokens=specials,
                            show_progress=False)
    cls, pad, sep, unk, mask = specials
    if style == "roberta":  # RoBERTa's own tokenizer class (its template, add_prefix_space=False) on that BPE
        import json

        from transformers import RobertaTokenizer

        model = json.loads(bpe._tokenizer.to_str())["model"]
        return RobertaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]])
    cls_id, sep_id = bpe.token_to_id(cls), bpe.token_to_id(sep)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B {sep}", special_tokens=[(cls, cls_id), (sep, sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, cls_token=cls, sep_token=sep, pad_token=pad,
                                   unk_token=unk, mask_token=mask, model_input_names=["input_ids", "attention_mask"])


def model_config(arch: str, tokenizer, *, layers: int = 2, heads: int = 4, hidden: int = 32, num_labels: int = 2,
                 max_positions: int = 128, init_std: float = 0.3):
    """A tiny config of `arch` sized for `tokenizer` (vocabulary, special ids), dropout off.

    init_std: the initialiser's std, larger than the usual 0.02 so that attention is far from uniform and
    disabling a head visibly changes the logits.
    """
    import transformers as tf

    common = dict(vocab_size=len(tokenizer), num_labels=num_labels, pad_token_id=tokenizer.pad_token_id,
                  initializer_range=init_std)
    bertlike = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                    intermediate_size=2 * hidden, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if arch == "bert":
        return tf.BertConfig(**common, **bertlike, max_position_embeddings=max_positions)
    if arch == "electra":
        return tf.ElectraConfig(**common, **bertlike, embedding_size=hidden // 2,
                                max_position_embeddings=max_positions)
    if arch == "roberta":
        return tf.RobertaConfig(**common, **bertlike, max_position_embeddings=max_positions + 2, type_vocab_size=1,
                                bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if arch == "distilbert":
        return tf.DistilBertConfig(**common, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=2 * hidden,
                                   dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0,
                                   max_position_embeddings=max_positions)
    if arch == "deberta-v2":
        return tf.DebertaV2Config(**common, **bertlike, max_position_embeddings=max_positions, type_vocab_size=0,
                                  relative_attention=True, position_buckets=16, max_relative_positions=-1,
                                  pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                                  position_biased_input=False, pooler_dropout=0.0, pooler_hidden_size=hidden)
    if arch == "modernbert":
        # 3 layers: global, sliding (window of 8 keys either side), global
        return tf.ModernBertConfig(**common, hidden_size=hidden, num_hidden_layers=max(layers, 3),
                                   num_attention_heads=heads, intermediate_size=2 * hidden,
                                   max_position_embeddings=max_positions, global_attn_every_n_layers=2,
                                   local_attention=8, attention_dropout=0.0, mlp_dropout=0.0, embedding_dropout=0.0,
                                   classifier_dropout=0.0, cls_token_id=tokenizer.cls_token_id,
                                   sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
                                   eos_token_id=tokenizer.sep_token_id)
    raise ValueError(f"unknown architecture {arch!r}; one of {', '.join(ARCHITECTURES)}")


def tokenizer_for(arch: str):
    if arch == "roberta":
        return bpe_tokenizer("roberta")
    if arch == "modernbert":
        return bpe_tokenizer("cls")
    return wordpiece_tokenizer()


def build_encoder(arch: str, path: Path, *, seed: int = 0, num_labels: int = 2, **sizes) -> Path:
    """Save a tiny random `arch` sequence classifier and its tokenizer to `path` (save_pretrained, safetensors)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    tokenizer = tokenizer_for(arch)
    config = model_config(arch, tokenizer, num_labels=num_labels, **sizes)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    path = Path(path)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


# ------------------------------------------------------------------------------------------ hand-built references

_QK_PAIRS = (("query", "key"), ("q_lin", "k_lin"), ("query_proj", "key_proj"), ("q", "k"), ("q_proj", "k_proj"))
_STACKED = ("Wqkv", "qkv_proj", "qkv")


def qk_rows(module, head: int, n_heads: int) -> list[tuple]:
    """(parameter, rows) pairs whose zeroing makes head `head`'s query and key zero, so its attention scores are
    all 0 (its softmax uniform over the keys the layer lets it see), whatever the module's layout:
    separate projections (BERT's query/key, DistilBERT's q_lin/k_lin, DeBERTa-v2's query_proj/key_proj, MPNet's
    q/k, q_proj/k_proj), stacked q|k|v (ModernBERT's Wqkv), DeBERTa v1's per-head interleaved in_proj and q_bias.
    Rotary embeddings rotate a zero vector to zero; DeBERTa's relative terms are products with q or k."""
    import torch

    out = []
    q_norm, k_norm = getattr(module, "q_norm", None), getattr(module, "k_norm", None)
    if q_norm is not None and getattr(q_norm, "weight", None) is not None and k_norm is not None and \
            q_norm.weight.shape[0] == n_heads * getattr(module, "head_dim", -1):
        # ESM C: a layer norm over all heads' queries (keys): zero head h's slice of its scale (and shift), not
        # the projection, which would change the other heads' normalisation
        for norm in (q_norm, k_norm):
            dh = norm.weight.shape[0] // n_heads
            out += [(p, slice(head * dh, (head + 1) * dh)) for p in (norm.weight, getattr(norm, "bias", None))
                    if p is not None]
        return out
    for q, k in _QK_PAIRS:
        if isinstance(getattr(module, q, None), torch.nn.Linear):
            for lin in (getattr(module, q), getattr(module, k)):
                dh = lin.out_features // n_heads
                out += [(p, slice(head * dh, (head + 1) * dh)) for p in (lin.weight, lin.bias) if p is not None]
            return out
    for name in _STACKED:
        lin = getattr(module, name, None)
        if isinstance(lin, torch.nn.Linear):
            d = lin.out_features // 3
            dh = d // n_heads
            for offset in (0, d):
                out += [(p, slice(offset + head * dh, offset + (head + 1) * dh)) for p in (lin.weight, lin.bias)
                        if p is not None]
            return out
    if hasattr(module, "in_proj"):  # DeBERTa v1: (N, T, H, 3*dh) per head: q | k | v, and a separate q_bias
        dh = module.in_proj.out_features // 3 // n_heads
        base = head * 3 * dh
        return [(module.in_proj.weight, slice(base, base + 2 * dh)), (module.q_bias, slice(head * dh, (head + 1) * dh))]
    raise AssertionError(f"no query/key projections known on {type(module).__name__}")


def unshared(model):
    """An ALBERT whose layers share one attention module, rebuilt with one group per layer holding a copy of the
    shared weights: the same function, with every layer's attention its own module (a reference can then change
    one layer only)."""
    import copy

    from transformers import AutoModelForSequenceClassification

    config = copy.deepcopy(model.config)
    groups = config.num_hidden_groups
    per_group = config.num_hidden_layers // groups
    config.num_hidden_groups = config.num_hidden_layers
    out = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval()
    state = {}
    for key, value in model.state_dict().items():
        if ".albert_layer_groups." in key:
            head, rest = key.split(".albert_layer_groups.")
            g, tail = rest.split(".", 1)
            for layer in range(int(g) * per_group, (int(g) + 1) * per_group):
                state[f"{head}.albert_layer_groups.{layer}.{tail}"] = value
        else:
            state[key] = value
    out.load_state_dict(state)
    return out.to(next(model.parameters()).dtype)


def reference_model(model_dir, disabled, *, dtype=None):
    """The plain eager model with the disabled heads' query and key weights zeroed (:func:`qk_rows`): their
    scores are all 0, so their softmax is uniform over the keys the layer lets them see.

    disabled: bool (L, H). A sliding-window layer must then be disabled whole and turned into a global one (so
    uniform = over the real tokens). Shared attention (ALBERT) is first unshared (:func:`unshared`). MPNet's
    relative position bias is one table for every layer: its column of a head is zeroed, so that head must be
    disabled in every layer."""
    import numpy as np
    import torch

    from bertology.ablation import heads as dis
    from bertology.models.loading import load_encoder

    model = load_encoder(str(model_dir), classifier=True)
    if dtype is not None:
        model = model.to(dtype)
    modules, _ = dis.attention_modules(model)
    if len(modules) < model.config.num_hidden_layers:
        model = unshared(model)
        modules, _ = dis.attention_modules(model)
    H = model.config.num_attention_heads
    disabled = torch.as_tensor(disabled)
    with torch.no_grad():
        for layer, module in enumerate(modules):
            for h in np.flatnonzero(disabled[layer].numpy()):
                for param, rows in qk_rows(module, int(h), H):
                    param[rows] = 0
            if getattr(module, "sliding_window", None) is not None and bool(disabled[layer].any()):
                assert bool(disabled[layer].all()), "a reference for a sliding layer needs the whole layer"
                module.sliding_window = None
                model.model.layers[layer].attention_type = "full_attention"
        bias = getattr(getattr(model.base_model, "encoder", None), "relative_attention_bias", None)
        if bias is not None:  # MPNet: (buckets, H), added to every layer's scores
            for h in np.flatnonzero(disabled.any(0).numpy()):
                assert bool(disabled[:, h].all()), "MPNet's position bias is shared: disable the head in every layer"
                bias.weight[:, h] = 0
    return model
