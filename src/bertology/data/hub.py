"""The Hugging Face hub source: ``datasets.load_dataset("nyu-mll/glue", task)``."""

from __future__ import annotations

import pandas as pd

from bertology.tasks import TaskSpec

HUB_DATASET = "nyu-mll/glue"


def load_hub_split(spec: TaskSpec, split: str) -> pd.DataFrame:
    """One split from the hub (or the local datasets cache); fails fast without a network."""
    from bertology.data import DataError
    from bertology.models import hub_reachable

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
