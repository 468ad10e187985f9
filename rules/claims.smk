# The claims ledger (step: bertology.steps.claims): every paper's claim the registry declares
# (bertology.registry.Claim) checked on this run's own tables, with an effect, an interval, a named test, Holm's
# correction over the run and a verdict. The report opens with it. Inputs: exactly the tables the claims read
# (bertology.claims.ledger.required_inputs), less those a config key switched off (the claim is then "not
# computed", naming the key). With two or more train.seeds it also writes each task's seeds/findings.csv, the
# ledger's per-seed view. A claim whose inputs do not depend on the task (Claim.task_free) is one row, task all.
#   results/claims.csv, results/claims.md, results/figures/claims.png (the forest plot)
from bertology.claims.ledger import required_inputs as claims_inputs

CLAIMS_OFF = ([] if NORMS_ENABLED else ["analysis.norms.enabled"]) + ([] if "random" in INITS else ["train.inits"])
CLAIMS_OFF += [] if SYNTAX_FILES else ["analysis.syntax.conllu"]


rule claims:
    input:
        tables=[layout.join(layout.ROOT, p) for p in claims_inputs(REGISTRY.claims(MODEL_KIND), TASK_NAMES, SEED_TAGS, off=CLAIMS_OFF)],
    output:
        **outputs("claims"),
    params:
        step=step("claims"),
        files=step_files("claims"),
    log:
        layout.log("claims"),
    benchmark:
        layout.benchmark("claims")
    threads: step_threads("claims")
    resources:
        **step_resources("claims"),
    conda:
        "../envs/bertology.yaml"
    shell:
        STEP

