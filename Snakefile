# bertology: open up the self-attention heads of BERT-family encoders.
#   snakemake --cores 2                          the embedded default (config.yaml), offline
#   snakemake --cores 8 --configfile config/paper.yaml
#   snakemake --profile profiles/slurm           on a SLURM cluster
import os

from snakemake.utils import min_version

min_version("9.0")


# The embedded config.yaml read strictly before Snakemake merges it: a key given twice or an alias bomb stops the
# workflow in one line (Snakemake's merge would walk a bomb of mappings for ever). rules/common.smk checks every
# other config file; a `--configfile` is merged by Snakemake before this line runs (`bertology validate-config`).
from bertology.workflow.snakefile import check_config_file_first

check_config_file_first(os.path.join(workflow.basedir, "config.yaml"))


# The embedded default; `--configfile my.yaml` overrides its keys.
configfile: os.path.join(workflow.basedir, "config.yaml")


# Snakemake's own report after a run: `snakemake --report report.zip` (the workflow's provenance and its results:
# the outputs flagged with report() in the rules, by paper; rules/steps.smk `reported`).
report: "report/workflow.rst"


# Several models (config `models:`, docs/reference.md#models): rules/models.smk runs this Snakefile once per model as
# a Snakemake module, each model's results under results/m/{name}/, and the run's ledger, report, explorer and
# comparisons over them. One model (`model:`): the workflow's machinery (the run's values, how a rule runs its step,
# input functions, --cache, the handlers), then one file of rules per area.
if config.get("models"):

    include: "rules/models.smk"

else:

    include: "rules/common.smk"
    include: "rules/steps.smk"
    include: "rules/inputs.smk"
    include: "rules/cache.smk"
    include: "rules/handlers.smk"
    include: "rules/data.smk"
    include: "rules/train.smk"
    include: "rules/attention.smk"
    include: "rules/ablation.smk"
    include: "rules/sieve.smk"
    include: "rules/kovaleva.smk"
    include: "rules/clark.smk"
    include: "rules/norms.smk"
    include: "rules/decoders.smk"
    include: "rules/seeds.smk"
    include: "rules/claims.smk"
    include: "rules/tables.smk"
    include: "rules/report.smk"


rule all:
    default_target: True
    input:
        targets(),
