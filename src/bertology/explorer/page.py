"""results/explorer.html on disk: load, render, write atomically."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bertology.explorer.load import load_explorer_data
from bertology.explorer.render import render_explorer
from bertology.pipeline.io import write_text

log = logging.getLogger(__name__)


def write_explorer(results: Path, tasks: list[str], output: Path, **kwargs: Any) -> Path:
    """load + render + write (atomically); for notebooks and the command. kwargs: those of
    :func:`bertology.explorer.load.load_explorer_data`."""
    text = render_explorer(load_explorer_data(Path(results), tasks, **kwargs))
    output = write_text(text, output)
    log.info("explorer: %s (%.2f MB)", output, output.stat().st_size / 1e6)
    return output
