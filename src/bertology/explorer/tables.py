"""The task tables on the explorer page: every table a report section shows for one task that is not a per-head table
(those are on the layer x head grid): a per-view, per-layer or per-task summary such as concentration.csv,
mixing.csv, faithfulness.csv or the disabling summary. Declared once, by the section's ``tables``
(:class:`bertology.registry.Section`), so a new analysis whose section names its table reaches the page with no edit
here; each table is read as its rule wrote it, one per variant where its path has one."""

from __future__ import annotations

import math
from typing import Any

from bertology.explorer.inputs import Inputs, table_files, task_templates

#: rows of one table the page embeds (the rest is in the file, and the page says how many there are)
MAX_ROWS = 200


def _cell(x: Any) -> Any:
    if isinstance(x, float):
        return None if not math.isfinite(x) else float(f"{x:.6g}")
    return x.item() if hasattr(x, "item") else x


def task_tables(src: Inputs, task: str, notes: list[str]) -> list[dict[str, Any]]:
    """The page's task tables of one task: title (the section's), file, variant, columns, rows (at most
    :data:`MAX_ROWS`) and n_rows; a table absent or undeclared is left out (the inputs say which run it)."""
    out = []
    for title, template, _ in task_templates():
        for variant, rel in table_files(task, template):
            path = src.file(rel)
            if not src.readable(path):
                continue
            df = src.read_csv(path, notes)
            if df is None:
                continue
            out.append({"title": title, "file": src.name(path), "variant": variant, "columns": list(df.columns),
                        "rows": [[_cell(x) for x in row] for row in df.head(MAX_ROWS).itertuples(index=False)],
                        "n_rows": int(len(df))})
    return out
