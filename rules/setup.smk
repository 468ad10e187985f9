# The run's set-up, for one model (rules/common.smk) and for several (rules/models.smk): the config checked once and
# the environment every job inherits.
from bertology.workflow.snakefile import check_config, setup_environment


# Snakemake's validate fills the schema's defaults (the only place they live); on failure one line names
# every bad key and the allowed values (no traceback: bertology.workflow.snakefile.fail). Before that, each config file
# read (config.yaml, --configfile, the profiles') is refused in one line if it repeats a key or is an alias bomb.
# The values of `--config` (strings, when nested) get the schema's types: --config 'data={"max_length": 64}'.
check_config(config, workflow.configfiles, workflow.basedir, getattr(workflow.config_settings, "config", None))


INVOCATION = setup_environment(config)


envvars:
    "BERTOLOGY_INVOCATION",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "BERTOLOGY_TRACKING_LIVE",
