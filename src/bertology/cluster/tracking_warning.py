"""Tracking on a cluster: jobs on many nodes must not share one sqlite MLflow database."""

from __future__ import annotations


def tracking_warnings(uri: str | None) -> list[str]:
    """A warning when cluster jobs would all write one sqlite MLflow database."""
    if uri and uri.startswith("sqlite:"):
        return [f"mlflow.tracking_uri is {uri}: jobs on several nodes would share one sqlite file, whose "
                f"locking is unreliable on shared filesystems. Start `mlflow server --backend-store-uri {uri}` "
                f"on the login node and set mlflow.tracking_uri to its http:// address (see the README, "
                f"'From a laptop to a cluster')."]
    return []
