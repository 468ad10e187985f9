"""Where and when a benchmark ran, for the JSON it writes under bench/out/ (bench/performance.py puts these
fields on docs/performance.md)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def provenance() -> dict:
    """The machine (host, processor, CPU count), the commit of the working tree and the UTC date."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "commit": commit, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
