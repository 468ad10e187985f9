# What the workflow does when it starts, succeeds and fails: the cluster check, the invocation's MLflow parent run,
# the job server (bertology.workflow.snakefile, bertology.workflow.jobserver, bertology.cluster).
import sys


onstart:
    from bertology import cluster
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import (capability_notes, check_job_dirs, end_failed_at_exit, on_start,
                                              remove_stale_pages)

    # With the slurm executor: stop before submitting anything when a job asks for more than any node
    # offers (sinfo), and warn when the jobs would all track to one sqlite file. A no-op otherwise.
    cluster.check_workflow(workflow)
    on_start(INVOCATION, config)
    # The parent run never stays RUNNING, even when Snakemake exits without calling onerror; a file where a
    # job's directory must be stops the workflow now, in one line, its run FAILED.
    end_failed_at_exit(INVOCATION)
    check_job_dirs(workflow, INVOCATION)
    # report.html and explorer.html whose inputs (claims.csv, ...) are gone or about to be recomputed are removed
    # now, not left beside a ledger they no longer show after a kill (each is rewritten atomically after them)
    remove_stale_pages(workflow, PAGE_RULES)
    for _name, _config in MODEL_CONFIGS.items():  # each model's (rules/common.smk, rules/models.smk)
        for note in capability_notes(_config):
            print(note if len(MODEL_CONFIGS) == 1 else f"{note} [model {_name}]", file=sys.stderr)
    # A local run's jobs fork from one process that has imported torch, transformers and the rest once
    # (bertology.workflow.jobserver; BERTOLOGY_JOB_SERVER=0 turns it off).
    jobserver.start_for_workflow(workflow)


onsuccess:
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import on_end

    jobserver.stop()
    on_end(INVOCATION, "FINISHED")


onerror:
    from bertology.workflow import jobserver
    from bertology.workflow.snakefile import on_end

    jobserver.stop()
    on_end(INVOCATION, "FAILED")
