"""The one way tests build a synthetic attention store: through the extraction's own writer.

:func:`write_store` takes the store's variables (a dict of arrays or an xarray Dataset of
docs/reference.md#store) and writes them with :func:`bertology.store.create_store`, one
:func:`bertology.store.write_chunk` per example chunk and :func:`bertology.store.finalize`, so a test's store has
exactly the layout, codecs, attributes and lifecycle of an extracted one (and the earlier layout,
:data:`bertology.store.LEGACY_LAYOUT`, when asked, as bertology <= 0.1 wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertology import store as st

#: attributes the writer sets itself (create_store / write_chunk / finalize)
LIFECYCLE = ("complete", "chunks_done", "n_chunks", "chunk_size", "codec", "layout")


def write_store(path: str | Path, data: Any, *, chunk_size: int = 4, attrs: Mapping[str, Any] | None = None,
                layout: str = st.LAYOUT, finish: bool = True) -> Path:
    """Write `data` as a complete store at `path` (overwriting) and return its path.

    data: a mapping (or xarray Dataset) holding every variable of :data:`bertology.store.DIMS`: attention
    (E, L, H, Q, Q), NaN past each example's length; input_ids, token_type_ids, segment, word_ids (E, Q); length,
    example_idx (E,). attrs: the store's attributes (default: a Dataset's own); `layers`, `heads`,
    `n_examples`, `max_length`, `keepbits` (None) and the precision attributes are filled in when absent,
    the lifecycle attributes (:data:`LIFECYCLE`) are the writer's. finish=False: stop before
    :func:`bertology.store.finalize` and return the partial store (``{path}.partial``, complete=False), as a
    killed extraction leaves it.
    """
    arrays = {name: np.asarray(data[name]) for name in st.DIMS}
    E, L, H, Q = arrays["attention"].shape[:4]
    given = dict(getattr(data, "attrs", {}) if attrs is None else attrs)
    full = {"layers": int(L), "heads": int(H), "n_examples": int(E), "max_length": int(Q), "keepbits": None}
    full.update({k: v for k, v in given.items() if k not in LIFECYCLE})
    full = {**st.precision_attrs(full["keepbits"]), **full}
    part = st.partial_path(path)
    root = st.create_store(part, example_idx=arrays["example_idx"], layers=int(L), heads=int(H), max_length=int(Q),
                           chunk_size=int(chunk_size), attrs=full, layout=layout)
    for c in range(-(-E // chunk_size)):
        rows = slice(c * chunk_size, min((c + 1) * chunk_size, E))
        st.write_chunk(root, c, {name: a[rows] for name, a in arrays.items() if name != "example_idx"})
    if not finish:
        return part
    return st.finalize(root, part, path)
