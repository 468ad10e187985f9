"""Steps: one function per rule, ``step(ctx: bertology.steps.context.StepContext) -> None``.

A step reads its declared inputs (``ctx.input.<name>``), calls kernels with arrays and frames, writes its
declared outputs (``ctx.output.<name>``) and records to MLflow through ``ctx.tracker``. Configuration
comes typed in ``ctx.config`` (only the sections the step declares in ``bertology.workflow.cli.STEPS``). Steps
are the only code that touches paths, MLflow and the command line; kernels stay pure.
"""
