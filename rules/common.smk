# Shared set-up: config validation, wildcard constraints, MLflow invocation, the target registry.
import json

from snakemake.utils import validate

from bertology.config import validate_config
from bertology.tasks import SPLITS, TASKS
from bertology.workflow import setup_environment

# A clear message naming the bad key first, then Snakemake's own validation (fills defaults).
config.update(validate_config(config))


validate(config, "../schemas/config.schema.yaml")


INVOCATION = setup_environment(config)


envvars:
    "BERTOLOGY_INVOCATION",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",


TASK_NAMES = list(config["tasks"])
PAIR_TASKS = [t for t in TASK_NAMES if TASKS[t].is_pair]
INITS = list(config["train"]["inits"])

# Every rule file appends the final outputs it contributes; `rule all` asks for all of them.
TARGETS = []


wildcard_constraints:
    task="|".join(TASKS),
    split="|".join(SPLITS),
    init="pretrained|random",


def as_json(section):
    """A config section as a JSON string for `--params {params.x:q}`; params changes re-run the rule."""
    return json.dumps(section, sort_keys=True)


# Input functions used by the files in rules/ (snakemake --lint wants functions and rules apart).
def _score_model(wildcards):
    """The fine-tuned model a score needs (none for the untrained-head `pretrained` variant)."""
    if wildcards.variant == "pretrained":
        return []
    init = "pretrained" if wildcards.variant == "finetuned" else "random"
    return f"results/models/{wildcards.task}/{init}"


def _kovaleva_stats_inputs(wildcards):
    inputs = {
        "store": f"results/attention/{wildcards.task}/{wildcards.variant}.zarr",
        "words": f"results/attention/{wildcards.task}/words.parquet",
    }
    if config["analysis"]["relations"]["framenet"]:
        inputs["framenet"] = f"results/stats/{wildcards.task}/{wildcards.variant}/relations_framenet.csv"
    if config["analysis"]["patterns"]["classifier"] != "rule":
        inputs["classifier"] = config["analysis"]["patterns"]["classifier"]
    return inputs


def _framenet_model_inputs(wildcards):
    inputs = {"links": "results/stats/framenet/links.parquet"}
    if wildcards.variant == "finetuned":
        inputs["model"] = f"results/models/{wildcards.task}/pretrained"
    return inputs


def _extract_inputs(wildcards):
    inputs = {
        "data": f"results/data/{wildcards.task}/{config['attention']['split']}.parquet",
        "words": f"results/attention/{wildcards.task}/words.parquet",
    }
    if wildcards.variant == "finetuned":
        inputs["model"] = f"results/models/{wildcards.task}/pretrained"
    return inputs


onstart:
    from bertology import tracking

    tracking.init_store()
    tracking.parent_run_id(INVOCATION, params=config)


onsuccess:
    from bertology import tracking

    tracking.end_invocation(INVOCATION, "FINISHED")


onerror:
    from bertology import tracking

    tracking.end_invocation(INVOCATION, "FAILED")
