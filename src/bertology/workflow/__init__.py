"""The top of bertology: what runs the workflow and is imported only by the Snakefile, its rules and
``python -m bertology``.

- :mod:`~bertology.workflow.cli`: the one command line, ``bertology <step>`` (a step per rule);
- :mod:`~bertology.workflow.launch` and :mod:`~bertology.workflow.jobserver`: the console script (which hands its
  job to the server), and the server that forks each local job from one process that has imported the science
  once; :mod:`~bertology.workflow.serverfiles`: the server's folder, markers and process state;
- :mod:`~bertology.workflow.snakefile`: the Snakefile's helpers (config checks, MLflow invocation, on-start checks);
- :mod:`~bertology.workflow.provenance`: the code and model versions of a cached output's key.

Nothing below imports this package (tests/test_hygiene.py, LAYERS).
"""
