"""The Hugging Face hub source: ``datasets.load_dataset("nyu-mll/glue", task)``."""

from __future__ import annotations

import pandas as pd

from bertology.pipeline.tasks import TaskSpec

HUB_DATASET = "nyu-mll/glue"


def load_hub_split(spec: TaskSpec, split: str) -> pd.DataFrame:
    """One split from the hub (or the local datasets cache); fails fast without a network."""
    from bertology.pipeline.errors import DataError
    from bertology.pipeline.hub import hub_reachable

    import datasets

    hub_split = spec.hub_splits[split]
    try:
        ds = datasets.load_dataset(HUB_DATASET, spec.name, split=hub_split)
    except Exception as err:  # offline, not cached, or a hub error
        reach = "" if hub_reachable() else " The hub cannot be reached from here (offline or HF_HUB_OFFLINE=1)."
        raise DataError(
            f"could not load {HUB_DATASET}/{spec.name} split {hub_split!r} from the Hugging Face hub: "
            f"{type(err).__name__}: {err}.{reach} Use data.source: demo (generated offline) or the path of "
            f"a directory in GLUE's download-script layout instead.") from None
    df = ds.to_pandas()
    return pd.DataFrame({
        "idx": df["idx"],
        "text_a": df[spec.text_a],
        "text_b": df[spec.text_b] if spec.text_b else None,
        "label": df["label"],
    })


def hub_revision(dataset: str = HUB_DATASET, timeout: float = 5.0) -> str:
    """The revision (commit sha) of the hub dataset the data rule reads: the hub's current one when it answers,
    else the one in the local Hugging Face cache, else "unknown". The data rule records it as a param, so a
    new revision re-runs the data rule and everything downstream."""
    import os

    from bertology.pipeline.hub import hub_reachable

    if hub_reachable(timeout=min(timeout, 3.0)):
        try:
            from huggingface_hub import HfApi

            return str(HfApi().dataset_info(dataset, timeout=timeout).sha)
        except Exception:  # noqa: BLE001 - fall back to the cache
            pass
    try:
        from huggingface_hub.constants import HF_HUB_CACHE

        ref = os.path.join(HF_HUB_CACHE, f"datasets--{dataset.replace('/', '--')}", "refs", "main")
        with open(ref) as fh:
            return fh.read().strip()
    except (OSError, ImportError):
        return "unknown"
