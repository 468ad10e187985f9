"""What every MLflow call of bertology shares: the tags that tie runs together, bounded retries on sqlite
lock contention, errors as one short line, nested params as flat keys."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

INVOCATION_ENV = "BERTOLOGY_INVOCATION"  # one id per `snakemake` call, set by the workflow (bertology.workflow.snakefile)
INVOCATION_TAG = "bertology.invocation"
KIND_TAG = "bertology.kind"  # "workflow" (the parent run) or "job"
WORKDIR_TAG = "bertology.workdir"  # the Snakemake working directory of a run
RETRY_TRIES = 8  # tries of one MLflow call while sqlite says "database is locked"


class _CaughtDatabaseErrors(logging.Filter):
    """Drops MLflow's own log record of a database error it re-raises ("SQLAlchemy database error. The following
    exception is caught.", with a 30-line SQLAlchemy traceback, once per try): bertology catches that error
    itself and says it in one line (:func:`reason`), keeping what could not be sent."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


logging.getLogger("mlflow.store.db.utils").addFilter(_CaughtDatabaseErrors())


def reason(err: BaseException, limit: int = 300) -> str:
    """An exception as one short line: its type and the first lines of its message, without SQLAlchemy's
    [SQL: ...] / [parameters: ...] / (Background ...) / autoflush lines (a locked sqlite store says
    "OperationalError: (sqlite3.OperationalError) database is locked")."""
    skip = ("[SQL", "[parameters", "(Background on this error", "(raised as a result of Query-invoked autoflush")
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and not line.strip().startswith(skip)]
    text = " ".join(" ".join(lines).split())
    return f"{type(err).__name__}: {text[:limit]}" if text else type(err).__name__


def retry(fn, *args, tries: int | None = None, **kwargs):
    """Run an MLflow call, retrying (`tries`, default :data:`RETRY_TRIES`) on sqlite lock contention between
    parallel jobs; any other error is raised at once."""
    tries = RETRY_TRIES if tries is None else tries
    for attempt in range(tries):
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - MLflow wraps sqlite errors in several types
            if attempt == tries - 1 or "locked" not in str(err).lower():
                raise
            time.sleep(0.2 * 2 ** attempt)
    return None


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}: nested config as MLflow params."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def param_chunks(params: Mapping[str, Any], size: int = 100) -> list[dict[str, str]]:
    """Nested params flattened, each value cut to MLflow's 6000 characters, in requests of `size` params."""
    items = [(k, str(v)[:6000]) for k, v in flatten(params).items()]
    return [dict(items[i:i + size]) for i in range(0, len(items), size)]
