"""The one step of every table function the registry declares (:attr:`bertology.registry.Step.function`): a
pure function from named input tables to named output tables, with no step or rule of its own.

The rule (``rules/tables.smk``, one per declared function) passes the step's declared inputs and outputs; this step
reads each input (``.parquet`` or ``.csv``) into a frame, calls the function with them as keyword arguments (and,
for a step that declares config sections, its typed config as ``config``), checks
that it returned exactly the declared outputs with their declared columns
(:func:`bertology.registry.check_outputs`) and writes each one (``.csv``). Adding such an analysis is four files:
its function, its registry entry (CONTRIBUTING.md, "Adding an analysis"), its section of docs/reference.md and its
test.
"""

from __future__ import annotations

from bertology.analyses import REGISTRY
from bertology.pipeline.io import write_csv
from bertology.registry import check_outputs
from bertology.steps.context import StepContext
from bertology.steps.tables import read_table


def table_function(ctx: StepContext) -> None:
    """Run the registry's table function of this step on its inputs and write its tables."""
    step = REGISTRY.step(ctx.step)
    frames = {name: read_table(getattr(ctx.input, name)) for name, _ in step.inputs}
    settings = {"config": ctx.config} if step.config else {}
    tables = step.function(**frames, **settings)
    check_outputs(step.function, tables, REGISTRY.tables_of(ctx.step))
    for name, frame in tables.items():
        write_csv(frame, getattr(ctx.output, name))
        ctx.tracker.metrics({f"{name}.rows": float(len(frame))})
    ctx.log.info("%s: %s", ctx.step, ", ".join(f"{n} {len(f)} rows" for n, f in tables.items()))
