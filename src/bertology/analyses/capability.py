"""What the config's model allows, decided once per model and remembered (read by the Snakefile to build the DAG).

Whether the norm analyses (value norms) and the head-disabling sweeps can run on a model is told from its
classifier built on the meta device (:func:`bertology.models.loading.meta_classifier`): that imports torch and
transformers and builds the model, seconds of work that a dry run (``snakemake -n``, ``--lint``) should not pay
each time it reads the Snakefile. :func:`model_capabilities` makes that decision once per model and keeps it in
a small JSON file in the user's cache (:func:`capability_cache_dir`: ``capability/`` beside the converted models of
:func:`bertology.models.gguf.model_cache_dir`), so that every working directory reads it back; the file is
named by a key of everything the decision depends on:

- the model's resolved directory and the SHA-256 of its ``config.json`` (the architecture);
- the installed transformers version (which classes it builds from that config);
- the source of the modules that decide (:mod:`bertology.models.loading`, :mod:`bertology.models.layers`,
  :mod:`bertology.norms.values`, :mod:`bertology.ablation.heads`, this module).

Reading the key imports neither torch nor transformers (:mod:`bertology.pipeline.versions`: the version from the
package metadata, the source as bytes). A model that is not a local directory yet (a hub name not in the local
cache) is decided afresh each time and never remembered: its jobs report their own errors.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from bertology.pipeline.versions import package_version, source_digest

# The modules whose code makes the decision (relative to src/bertology): an edit to any of them decides again.
DECIDING_MODULES = ("models/loading.py", "models/kinds.py", "analyses/capability.py", "norms/values.py",
                    "ablation/heads.py", "models/layers.py")


def capability_cache_dir() -> Path:
    """Where the decisions are kept: ``capability/`` beside the converted models
    (:func:`bertology.models.gguf.model_cache_dir`: ``$BERTOLOGY_CACHE`` or ``$XDG_CACHE_HOME/bertology``)."""
    from bertology.models.gguf import model_cache_dir

    return model_cache_dir().parent / "capability"


def local_model_dir(name_or_path: str) -> Path | None:
    """The model's directory holding its config.json, without importing torch or transformers; None when it is
    not on this machine yet (a hub name not cached) or cannot be resolved."""
    from bertology.models.loading import resolve_model

    try:
        path = Path(resolve_model(name_or_path))
    except Exception:  # noqa: BLE001 - onstart and the jobs report an unresolvable model
        return None
    return path if (path / "config.json").is_file() else None


def capability_key(model_dir: Path) -> str:
    """The cache key of a model directory's decisions: SHA-256 of its resolved path, its config.json, the
    transformers version and the deciding modules' source (first 24 hex digits)."""
    h = hashlib.sha256()
    for part in (str(model_dir.resolve()), hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest(),
                 package_version("transformers"), source_digest(DECIDING_MODULES)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def model_kind_of(name_or_path: str) -> str:
    """"decoder" or "encoder" (:func:`bertology.models.kinds.model_kind`) from the model's config; "encoder" when the
    config cannot be read yet (a hub name not cached: its jobs report their own errors)."""
    from transformers import AutoConfig

    from bertology.models.loading import resolve_model
    from bertology.models.kinds import model_kind, unsupported_model

    try:
        path = resolve_model(name_or_path)
        config = AutoConfig.from_pretrained(path, local_files_only=Path(path).is_dir(), trust_remote_code=False)
    except Exception:  # noqa: BLE001 - onstart and the jobs report an unreadable model
        return "encoder"
    return model_kind(config) if unsupported_model(config) is None else "encoder"


def decide_capabilities(name_or_path: str) -> dict[str, str | None]:
    """{"norms": why value norms cannot be computed or None, "disabling": why heads cannot be disabled or None,
    "kind": "encoder" or "decoder"}, from the classifier built on the meta device (imports torch and
    transformers)."""
    from bertology.ablation.heads import disabling_unsupported
    from bertology.norms.values import norms_unsupported

    return {"norms": norms_unsupported(name_or_path), "disabling": disabling_unsupported(name_or_path),
            "kind": model_kind_of(name_or_path)}


def model_capabilities(name_or_path: str, cache_dir: Path | str | None = None) -> dict[str, str | None]:
    """:func:`decide_capabilities`, decided once per :func:`capability_key` and read back from
    ``cache_dir/<key>.json`` after that (`cache_dir`: :func:`capability_cache_dir` unless given; a file that
    cannot be read or written is decided again, never an error)."""
    model_dir = local_model_dir(name_or_path)
    if model_dir is None:
        return decide_capabilities(name_or_path)
    directory = Path(cache_dir) if cache_dir is not None else capability_cache_dir()
    cache = directory / f"{capability_key(model_dir)}.json"
    try:
        kept = json.loads(cache.read_text())
        return {"norms": kept["norms"], "disabling": kept["disabling"], "kind": kept["kind"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    decided = decide_capabilities(name_or_path)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"model": str(model_dir), **decided}, indent=1))
        os.replace(tmp, cache)
    except OSError:
        pass
    return decided
