"""The errors of the user's making (bad config, missing or malformed input, a store that does not match).

``bertology`` prints a :class:`UserError` (and only a UserError) as one line that names the problem and the
fix. Any other exception is a bug: one line on the console and its full traceback in the job's log
(:func:`bertology.workflow.cli.main`). Subclasses elsewhere: ``config.ConfigError``, ``data.DataError``,
``store.StoreError``, ``models.ModelNotFoundError``, ``tasks.UnknownTaskError``,
``ablation.heads.DisablingUnsupported``, ``training.TrainingDivergedError``. They also derive from the
built-in exception a caller would expect (ValueError, KeyError, FileNotFoundError, ...).
"""

from __future__ import annotations

import shlex


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and how to fix it."""


class InputError(UserError, ValueError):
    """An input file (a table, a label sheet, a score record) is malformed or does not fit the others."""


class MissingInputError(UserError, FileNotFoundError):
    """An input file the step needs does not exist; the message says which rule or command makes it."""


class DataError(UserError, ValueError):
    """Input data is missing or malformed; the message names the file and the fix."""


def snakemake_command(*targets: str, cache: bool = False, force: bool = False, forcerun: tuple[str, ...] = ()) -> str:
    """The Snakemake command a message suggests to make `targets` (paths under the experiment's working directory;
    none: the workflow's) again, to be run there: ``snakemake --cores 2 [--force] [--forcerun RULE ...] [--cache]
    [--] TARGET ...``. Local execution needs ``--cores``; ``--force`` re-runs the jobs of the targets alone, not
    what they read; ``--forcerun`` the rules named and every job after them; ``--cache`` and ``--forcerun`` take
    lists, so ``--`` ends them before the targets."""
    options = ["--cores", "2", *(["--force"] if force else []), *(["--forcerun", *forcerun] if forcerun else []),
               *(["--cache"] if cache else [])]
    ends = ["--"] if targets and (cache or forcerun) else []
    return " ".join(["snakemake", *options, *ends, *(shlex.quote(str(t)) for t in targets)])
