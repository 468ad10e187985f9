"""Does the tracking store answer? A quick probe before any run is opened, so a store that is down costs
seconds, not one timeout per call."""

from __future__ import annotations

import os
from pathlib import Path

from bertology.tracking.calls import reason
from bertology.tracking.uri import tracking_uri

PROBE_TIMEOUT_S = 3.0  # how long a job waits for a tracking server before it keeps its record for later


class TrackingUnreachable(Exception):
    """The tracking store does not answer (raised only by :func:`check_reachable`)."""


def check_reachable(uri: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`TrackingUnreachable` (one line naming the URI) unless the tracking store answers within
    `timeout` seconds: an http(s) server's /health, or a sqlite database's directory being writable."""
    uri = tracking_uri(uri)
    if uri.startswith(("http://", "https://")):
        import requests

        try:
            response = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
        except requests.RequestException as err:
            raise TrackingUnreachable(f"the MLflow tracking server {uri} does not answer ({type(err).__name__} "
                                      f"within {timeout:g} s)") from None
        if response.status_code >= 500:
            raise TrackingUnreachable(f"the MLflow tracking server {uri} answers HTTP {response.status_code}")
    elif uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///"):]).resolve().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise TrackingUnreachable(f"the MLflow tracking store {uri} cannot be created: {reason(err)}") from None
        if not os.access(folder, os.W_OK):
            raise TrackingUnreachable(f"the MLflow tracking store {uri}: {folder} is not writable")
