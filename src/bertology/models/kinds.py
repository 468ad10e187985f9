"""What a model is, read from its transformers config alone (no weights, no tokenizer): an encoder or a decoder
(:func:`model_kind`), a model bertology cannot study (:func:`unsupported_model`), how its heads and layers attend
(:func:`attention_geometry`), and the model types of the installed transformers it reads as each kind (the rows
of the compatibility matrix)."""

from __future__ import annotations


def attention_geometry(config) -> dict[str, list]:
    """How a model's heads and layers attend, from its config, as the store records it:

    - ``head_groups`` (H,): the key/value head each query head reads, h // (H / KV) with KV =
      ``num_key_value_heads`` (transformers' ``repeat_kv`` order); 0..H-1 where every head has its own (KV = H);
    - ``layer_windows`` (L,): each layer's ``sliding_window`` where its ``layer_types`` entry is a sliding one
      (Gemma 2/3, ModernBERT's local layers), the config's ``sliding_window`` for every layer of a model that
      names one but no layer types (Mistral), else None (full attention, as the model's own mask applies it).
    """
    heads, layers = int(config.num_attention_heads), int(config.num_hidden_layers)
    kv = getattr(config, "num_key_value_heads", None) or heads
    kv = int(kv) if heads % int(kv) == 0 else heads
    groups = [h // (heads // kv) for h in range(heads)]
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types is not None and len(types) == layers:
        windows = [int(window) if window and "sliding" in str(t) else None for t in types]
    else:
        windows = [int(window) if window else None] * layers
    return {"head_groups": groups, "layer_windows": windows}


def model_kind(config) -> str:
    """``"decoder"`` for a config whose model type has a causal language-model head in transformers and no
    masked-language-model head (GPT-2, Llama, Qwen2, Mistral, Gemma, ...), else ``"encoder"``. Only meaningful
    where :func:`unsupported_model` is None."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES)

    kind = getattr(config, "model_type", "?")
    return ("decoder" if kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
            else "encoder")


def unsupported_model(config) -> str | None:
    """What a transformers config is when bertology cannot study it ("an encoder-decoder (t5)", "configured as a
    decoder (bert, is_decoder: true)", ...), None when it is a bidirectional encoder (a model type with a
    masked-language-model head that is neither an encoder-decoder nor configured as a decoder) or a decoder
    language model (a model type with a causal language-model head and a sequence-classification head)."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
                                                        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)

    kind = getattr(config, "model_type", "?")
    if getattr(config, "is_encoder_decoder", False):
        return f"an encoder-decoder ({kind})"
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        if getattr(config, "is_decoder", False):
            return f"configured as a decoder ({kind}, is_decoder: true)"
        return None
    if kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        if kind not in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
            return f"a decoder without a sequence-classification head in transformers ({kind})"
        return None
    return f"not a language model of a kind bertology reads (model type {kind})"


def _default_configs(kind: str) -> list[str]:
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    out = []
    for model_type in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        try:
            config = CONFIG_MAPPING[model_type]()
        except Exception:  # noqa: BLE001 - a config that cannot be built with defaults is not one we can check
            continue
        if unsupported_model(config) is None and model_kind(config) == kind:
            out.append(model_type)
    return sorted(out)


def encoder_model_types() -> list[str]:
    """Every model type of the installed transformers' sequence-classification mapping that bertology reads as
    a bidirectional encoder (:func:`unsupported_model` of its default config is None, :func:`model_kind`
    "encoder"): the rows of the compatibility matrix (tests/test_matrix.py, README "Encoders checked")."""
    return _default_configs("encoder")


def decoder_model_types() -> list[str]:
    """Every model type of the sequence-classification mapping that bertology reads as a decoder (causal
    attention): the decoder rows of the compatibility matrix."""
    return _default_configs("decoder")
