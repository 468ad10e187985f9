"""What enters Snakemake's between-workflow cache key beyond the rule's own params and inputs.

``snakemake --cache`` (with ``SNAKEMAKE_OUTPUT_CACHE``) reuses a fine-tuned model or an attention store across
working directories when the job's provenance hash matches: Snakemake hashes the rule's shell command, its
params (the config sections the step reads, the job's wildcards and paths), the files it reads that no job
makes, and, chained, the same of every job upstream. Two things the params do not say on their own:

- :func:`code_version`: which code computes the output (the package version and the source of the modules the
  step runs), so that an edit to them computes afresh;
- :func:`model_version`: which model a name stands for (the embedded MiniLM, a local directory or a cached hub
  snapshot: its config.json, tokenizer files and weights), so that other weights under the same name compute
  afresh.

Both are added as params only when the workflow runs with ``--cache`` (``rules/cache.smk``: ``cache_params``),
so a run without the cache never re-runs a job because code elsewhere changed.
"""

from __future__ import annotations

import hashlib

from bertology.pipeline.versions import package_version, source_digest

# The package files and folders (relative to src/bertology/) each cached rule's output depends on.
CODE: dict[str, tuple[str, ...]] = {
    "train_model": ("models/training.py", "models/batching.py", "models/lora.py", "models/checkpoint.py",
                    "models/loading.py", "models/kinds.py", "models/gguf.py", "models/encoding.py",
                    "models/metrics.py", "pipeline/seedtags.py", "pipeline/config.py", "pipeline/configjson.py",
                    "data", "steps/train.py"),
    "extract_attention": ("attention/extract.py", "models/loading.py", "models/kinds.py", "models/gguf.py",
                          "models/encoding.py",
                          "pipeline/seedtags.py", "pipeline/config.py", "pipeline/configjson.py", "data", "store",
                          "norms/values.py", "models/hooks.py", "attention/annotate.py", "steps/attention.py"),
}
TOKENIZER_GLOBS = ("tokenizer*.json", "vocab.*", "merges.txt", "special_tokens_map.json", "*.model")


def code_version(rule: str) -> str:
    """``<bertology version>+<sha256 of the sources of CODE[rule]>`` (first 16 hex digits;
    :func:`bertology.pipeline.versions.source_digest`)."""
    return f"{package_version('bertology', missing='0')}+{source_digest(CODE[rule])[:16]}"


def model_version(name_or_path: str) -> str:
    """The model a config's `model` stands for: SHA-256 (16 hex digits) of its config.json, tokenizer files and
    weights (bertology.models.loading.weights_fingerprint); the name itself when it is not on this machine (a hub name
    not cached yet: its jobs download it, and the cache cannot tell one revision from another)."""
    from bertology.analyses.capability import local_model_dir
    from bertology.models.loading import weights_fingerprint

    path = local_model_dir(str(name_or_path))
    if path is None:
        return f"name:{name_or_path}"
    h = hashlib.sha256()
    for pattern in ("config.json", *TOKENIZER_GLOBS):
        for f in sorted(path.glob(pattern)):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    h.update(weights_fingerprint(path).encode())
    return h.hexdigest()[:16]
