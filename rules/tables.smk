# Every table function of the registry (bertology.registry.Step.function; step: bertology.steps.functions): one rule
# each, built from its declaration: its inputs, its declared outputs, its threads and resources. A new table
# function needs no edit here (CONTRIBUTING.md, "Adding an analysis").


for _step in REGISTRY.table_steps():

    rule:
        name:
            _step.name
        input:
            **REGISTRY.inputs(_step.name),
        output:
            **outputs(_step.name),
        params:
            step=step(_step.name),
            files=step_files(_step.name),
        log:
            layout.log(_step.name, job_path(_step.name)),
        benchmark:
            layout.benchmark(_step.name, job_path(_step.name))
        threads: step_threads(_step.name)
        resources:
            **step_resources(_step.name),
        conda:
            "../envs/bertology.yaml"
        shell:
            STEP
