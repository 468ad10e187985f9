"""The ``bertology`` command: a job of a local Snakemake run goes to the job server (:mod:`bertology.workflow.jobserver`:
its step runs in a child of a process that has imported everything already); otherwise, or when the server
refuses it, the step runs here (:func:`bertology.workflow.cli.main`). This module imports nothing heavy itself."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from bertology.workflow.jobserver import submit

    code = submit(argv)
    if code is None:
        from bertology.workflow.cli import main as run_here

        code = run_here(argv)
    return code


if __name__ == "__main__":
    sys.exit(main())
