# bertology: open up the self-attention heads of BERT-family encoders.
#   snakemake --cores 2                          the embedded default (config.yaml), offline
#   snakemake --cores 8 --configfile config/paper.yaml
#   snakemake --profile profiles/slurm           on a SLURM cluster
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"


rule all:
    default_target: True
    input:
        TARGETS,
