# `snakemake --cache` with SNAKEMAKE_OUTPUT_CACHE=DIR (docs/guide.md, "Reuse across experiments"): fine-tuned models
# and attention stores (`cache: CACHING`) are shared through DIR by every working directory. What the params do
# not say on their own, the code that computes an output and the model's own files, enters their key then
# (`cache_params`, bertology.workflow.provenance), and only then: a run without the cache never re-runs a job for an
# edit elsewhere.
import os

CACHING = getattr(workflow.workflow_settings, "cache", None) is not None
if CACHING:
    # bertology.pipeline.outputcache: the cache readable at start (one line otherwise); each cached job that has to
    # run checks it can store its output before computing (BERTOLOGY_OUTPUT_CACHE); entries get a shared cache's
    # modes (group-writable directories at most, not Snakemake's 0666/0777) and the cache directory's group.
    # bertology.pipeline.cachestore: one entry per key when experiments store it at once (the first kept, a later
    # copy dropped and linked to it), and a fetch refuses an entry holding files its digest does not list.
    from bertology.pipeline.cachestore import canonical_entries
    from bertology.pipeline.outputcache import CACHE_ENV, CACHING_ENV, check_cache_dir, share_permissions
    from bertology.workflow.snakefile import fail

    if (_why := check_cache_dir(os.environ.get(CACHE_ENV))) is not None:
        fail(_why)
    os.environ[CACHING_ENV] = os.environ[CACHE_ENV]
    share_permissions()
    canonical_entries()


def cache_params(name):
    """The cached rule's extra params under --cache (code and model versions); none otherwise."""
    if not CACHING:
        return {}
    from bertology.workflow.provenance import code_version, model_version

    return {"code_version": code_version(name), "model_version": model_version(config["model"])}


def without_benchmark_when_cached(proxy):
    """Under --cache, drop the rule's benchmark file: Snakemake refuses one on a cached rule (a job taken from the
    cache has no run to measure), and its rule API has no way to unset one (Rule.benchmark's setter takes a path)."""
    if CACHING:
        proxy.rule._benchmark = None
