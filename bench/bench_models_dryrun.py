"""Benchmark: `snakemake -n` time against the job count at 1, 3 and 10 models (config `models:`, issue 57).

Each configuration is 7 GLUE tasks (cola, sst2, mrpc, stsb, qqp, qnli, rte) x train.seeds [42, 43, 44], read from a
GLUE-layout folder the benchmark writes into a temporary directory (each task's train.tsv and dev.tsv: its header,
CoLA's none, and two rows; a dry run reads no row), `mlflow: {required: false}`, and:
  plain      `model: minilm-l6`, no `models:`: today's one-model workflow, the reference
  models-N   `models:` with N entries `{name: mK, model: minilm-l6}` (K = 1..N): the Snakefile once per model as a
             Snakemake module, plus the shared module (rules/models.smk)
Every model is the embedded MiniLM, whose capabilities the warm-up decides once and caches in the benchmark's own
user cache ($BERTOLOGY_CACHE in the temporary directory, never the user's): the times are the workflow's (parsing,
modules, the DAG), not a model probe's.

In one run, interleaved round by round, each a fresh `snakemake -n -q` process in a new working directory: its
wall time and its CPU time (user plus system, which other work on the machine disturbs less); medians over the
rounds. The job count of each configuration comes from its warm-up, `snakemake -n -q rules host reason` (the
"total" line of the job stats, the only thing that run prints besides the header), which also writes the bytecode
(kept in a temporary PYTHONPYCACHEPREFIX as an installed package keeps it; `--as-is` keeps the environment's own
setting) and fills the user cache. Reported per configuration: seconds, jobs, seconds per 1,000 jobs, the ratio
to plain; across the model counts: the ratio of the 10-model time to 10x the 1-model time (below 1: the fixed
start-up is paid once), the marginal cost of a model (seconds and seconds per 1,000 jobs between 1 and the largest
count), and a least-squares line of CPU seconds on the model count with its largest residual (linear: small).

`--profile` then samples the largest configuration's dry run with py-spy (in the venv) and writes the share of
samples under each stage (Snakemake's start-up imports, the Snakefile and its modules, our check_config, the
registry, the DAG's job discovery and needrun pass, ...) and the functions of ours (src/bertology, rules/) with the
largest inclusive share.

    .venv/bin/python bench/bench_models_dryrun.py --repeats 3 --profile

Goal: the dry run grows linearly with the models (its time per 1,000 jobs flat across 1, 3 and 10 models) and
10 models cost no more than 10x one. Writes bench/out/bench_models_dryrun.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
TASKS = ["cola", "sst2", "mrpc", "stsb", "qqp", "qnli", "rte"]
SEEDS = [42, 43, 44]
MODEL = "minilm-l6"
# folder -> (header line, None for CoLA's header-less files; two rows): bertology.data.glue_dir.LAYOUTS and
# bertology.pipeline.tasks.TASKS (glue_dir, glue_files)
GLUE = {
    "CoLA": (None, ["gj04\t1\t\tThe sailors rode the breeze clear of the rocks.",
                    "gj04\t0\t*\tThe more we study verbs, the more they."]),
    "SST-2": ("sentence\tlabel", ["a gripping film\t1", "dull and slow\t0"]),
    "MRPC": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
             ["1\t1\t2\tHe went home.\tHe returned home.", "0\t3\t4\tIt rained.\tThe sun shone."]),
    "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              ["0\tmain\tx\t2012\t0\tnone\tnone\tA man plays.\tA man is playing.\t4.5",
               "1\tmain\tx\t2012\t1\tnone\tnone\tA cat sits.\tA plane flies.\t0.2"]),
    "QQP": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            ["0\t1\t2\tHow old are you?\tWhat is your age?\t1", "1\t3\t4\tWhy?\tWhere?\t0"]),
    "QNLI": ("index\tquestion\tsentence\tlabel",
             ["0\tWho did it?\tHe did it.\tentailment", "1\tWhen?\tA dog barks.\tnot_entailment"]),
    "RTE": ("index\tsentence1\tsentence2\tlabel",
            ["0\tA dog runs.\tAn animal moves.\tentailment", "1\tIt is red.\tIt is blue.\tnot_entailment"]),
}


def write_glue(root: Path) -> Path:
    """A GLUE-layout folder with the 7 tasks' train.tsv and dev.tsv (a header and two rows each)."""
    for folder, (header, rows) in GLUE.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        text = "".join(f"{line}\n" for line in ([header] if header else []) + rows)
        for name in ("train.tsv", "dev.tsv"):
            (root / folder / name).write_text(text)
    return root


def config(models: int | None, glue: Path) -> dict:
    """The benchmark's config: `model: minilm-l6` (models None) or `models:` with that many entries."""
    base = {"tasks": TASKS, "train": {"seeds": SEEDS}, "data": {"source": str(glue)}, "mlflow": {"required": False}}
    if models is None:
        return {"model": MODEL, **base}
    return {"models": [{"name": f"m{k}", "model": MODEL} for k in range(1, models + 1)], **base}


def environment(cache: Path, pycache: Path | None) -> dict[str, str]:
    env = dict(os.environ, BERTOLOGY_CACHE=str(cache), PYTHONPATH=str(REPO / "src"))
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def snakemake_args(configfile: Path, quiet: list[str]) -> list[str]:
    return ["-s", str(REPO / "Snakefile"), "--configfile", str(configfile), "--cores", "1", "-n", "-q", *quiet]


def timed(args: list[str], cwd: Path, env: dict[str, str], capture: bool = False) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds: user + system, stdout when captured) of one `snakemake` process."""
    exe = Path(sys.executable).parent / "snakemake"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([str(exe), *args], cwd=cwd, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed in {cwd}:\n{proc.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout or ""


def job_count(text: str) -> int:
    """The last "total N" line of a dry run's job stats."""
    totals = re.findall(r"^total\s+(\d+)\s*$", text, flags=re.M)
    if not totals:
        sys.exit(f"no 'total' line in the dry run's output:\n{text[-2000:]}")
    return int(totals[-1])


def fit(xs: list[float], ys: list[float]) -> dict:
    """Least squares y = a + b x, and the largest residual relative to y."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    worst = max(abs(y - (a + b * x)) / y for x, y in zip(xs, ys))
    return {"intercept_s": a, "per_model_s": b, "max_relative_residual": worst}


# stage -> a test on one sampled frame ("function (file:line)", as py-spy's raw format writes it)
def _name(frame: str) -> str:
    return frame.split(" (")[0]


def _file(frame: str) -> str:
    return frame.split(" (", 1)[1] if " (" in frame else ""


STAGES = {
    "snakemake start-up imports (snakemake.cli)": lambda f: _name(f) == "<module>" and "snakemake/cli.py" in _file(f),
    "Snakefile and rule files, all modules (parse + exec)": lambda f: _name(f) == "<module>" and _file(f).startswith(
        "Snakefile:"),
    "  rules/models.smk (the modules, use rule)": lambda f: "models.smk" in _file(f),
    "  Snakemake's parser (.smk -> Python)": lambda f: "snakemake/parser.py" in _file(f) and _name(f) == "parse",
    "  Snakemake modules.use_rules": lambda f: "snakemake/modules.py" in _file(f),
    "  Workflow.rule (rule objects: set_input/output)": lambda f: _name(f) == "Workflow.rule.<locals>.decorate",
    "  ours: check_config (bertology.workflow.snakefile)": lambda f: _name(f) == "check_config",
    "    ours: validate_config (jsonschema, defaults)": lambda f: _name(f) == "validate_config",
    "  ours: check_config_file_first": lambda f: _name(f) == "check_config_file_first",
    "  ours: bertology.registry (outputs, targets)": lambda f: "bertology/registry.py" in _file(f),
    "  ours: bertology.pipeline.layout": lambda f: "bertology/pipeline/layout.py" in _file(f),
    "  ours: model_capabilities (cached)": lambda f: _name(f) == "model_capabilities",
    "DAG build (Workflow._build_dag)": lambda f: _name(f) == "Workflow._build_dag",
    "  DAG.update (job discovery)": lambda f: _name(f) == "DAG.update",
    "  DAG.file2jobs (output index)": lambda f: _name(f) == "DAG.file2jobs",
    "  DAG.update_needrun": lambda f: _name(f) == "DAG.update_needrun",
    "  DAG.postprocess": lambda f: _name(f) == "DAG.postprocess",
    "  ours: input functions (rules/inputs.smk)": lambda f: _file(f).startswith("inputs.smk"),
    "any function of ours (src/bertology, rules/*.smk)": lambda f: _ours(f),
}


def _ours(frame: str) -> bool:
    """A frame of a function of ours: src/bertology, or a function of a rule file (py-spy names one by its base
    name; not a rule file's top level, where Snakemake builds the rules)."""
    where = _file(frame).split(":")[0]
    return ("bertology/" in where and "site-packages" not in where) or (where.endswith(".smk")
                                                                        and _name(frame) != "<module>")


def profile(args: list[str], cwd: Path, env: dict[str, str], raw: Path) -> dict:
    """py-spy's samples of one dry run: the share under each stage and our top functions (inclusive)."""
    spy = Path(sys.executable).parent / "py-spy"
    exe = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run([str(spy), "record", "-r", "200", "--format", "raw", "-o", str(raw), "--",
                           sys.executable, str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not raw.is_file():
        return {"error": (proc.stderr or proc.stdout)[-1000:]}
    stacks = []
    for line in raw.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        stacks.append((frames.split(";"), int(count)))
    total = sum(n for _, n in stacks)
    shares = {stage: sum(n for frames, n in stacks if any(test(f) for f in frames)) / total
              for stage, test in STAGES.items()}
    ours: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        for key in {f"{_name(f)} ({_file(f).split(':')[0]})" for f in frames
                    if _ours(f)}:
            ours[key] += n
    return {"samples": total, "rate_hz": 200, "stage_share": shares,
            "ours_top_share": {k: n / total for k, n in ours.most_common(20)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="1,3,10", help="model counts, comma-separated")
    ap.add_argument("--profile", action="store_true", help="sample the largest configuration with py-spy")
    ap.add_argument("--note", default="", help="what else ran on the machine meanwhile (kept in the JSON)")
    ap.add_argument("--as-is", action="store_true", help="keep the environment's bytecode setting")
    args = ap.parse_args()
    counts = [int(n) for n in args.models.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="bench_models_dryrun_", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    glue = write_glue(tmp / "glue")
    cache = tmp / "cache"
    pycache = None if args.as_is else tmp / "pycache"
    env = environment(cache, pycache)
    variants: dict[str, Path] = {}
    for name, models in [("plain", None), *((f"models-{n}", n) for n in counts)]:
        variants[name] = tmp / f"{name}.yaml"
        variants[name].write_text(yaml.safe_dump(config(models, glue), sort_keys=False))
    walls: dict[str, list[float]] = {v: [] for v in variants}
    cpus: dict[str, list[float]] = {v: [] for v in variants}
    jobs: dict[str, int] = {}
    warmup: dict[str, float] = {}
    runs = 0

    def workdir() -> Path:
        nonlocal runs
        runs += 1
        path = tmp / f"run-{runs}"
        path.mkdir()
        return path

    load_before = os.getloadavg()
    prof = None
    try:
        for name, configfile in variants.items():  # warm-up: the job count, the bytecode, the user cache
            wall, _, text = timed(snakemake_args(configfile, ["rules", "host", "reason"]), workdir(), env, capture=True)
            jobs[name], warmup[name] = job_count(text), wall
            print(f"warm-up {name}: {jobs[name]} jobs, {wall:.1f}s", flush=True)
        for r in range(args.repeats):
            for name, configfile in variants.items():
                wall, used, _ = timed(snakemake_args(configfile, []), workdir(), env)
                walls[name].append(wall)
                cpus[name].append(used)
            print(f"round {r + 1}: " + "  ".join(f"{v} {walls[v][-1]:.1f}s" for v in variants), flush=True)
        if args.profile:
            largest = f"models-{max(counts)}"
            prof = {"variant": largest, **profile(snakemake_args(variants[largest], []), workdir(), env,
                                                  tmp / "profile.raw")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {v: statistics.median(t) for v, t in walls.items()}
    med_cpu = {v: statistics.median(t) for v, t in cpus.items()}
    table = {v: {"jobs": jobs[v], "wall_s": med[v], "cpu_s": med_cpu[v],
                 "wall_s_per_1000_jobs": 1000 * med[v] / jobs[v], "cpu_s_per_1000_jobs": 1000 * med_cpu[v] / jobs[v],
                 "wall_ratio_to_plain": med[v] / med["plain"], "cpu_ratio_to_plain": med_cpu[v] / med_cpu["plain"]}
             for v in variants}
    lo, hi = f"models-{min(counts)}", f"models-{max(counts)}"
    span = max(counts) - min(counts)
    growth = {
        "wall_ratio_to_10x_one": med[hi] / (max(counts) / min(counts) * med[lo]),
        "cpu_ratio_to_10x_one": med_cpu[hi] / (max(counts) / min(counts) * med_cpu[lo]),
        "marginal_wall_s_per_model": (med[hi] - med[lo]) / span,
        "marginal_cpu_s_per_model": (med_cpu[hi] - med_cpu[lo]) / span,
        "marginal_jobs_per_model": (jobs[hi] - jobs[lo]) / span,
        "marginal_cpu_s_per_1000_jobs": 1000 * (med_cpu[hi] - med_cpu[lo]) / (jobs[hi] - jobs[lo]),
        "cpu_fit": fit([float(n) for n in counts], [med_cpu[f"models-{n}"] for n in counts]),
        "wall_fit": fit([float(n) for n in counts], [med[f"models-{n}"] for n in counts]),
    }
    result = {"repeats": args.repeats, "tasks": TASKS, "seeds": SEEDS, "model": MODEL, "models": counts,
              "model_note": (f"every model is the embedded {MODEL}, its capabilities cached by the warm-up in the "
                             "benchmark's own user cache: the times are the workflow's, not a model probe's"),
              "load_before": load_before, "load_after": os.getloadavg(), "note": args.note,
              "bytecode": ("as the environment sets it" if args.as_is
                           else "kept in a temporary PYTHONPYCACHEPREFIX, written by the warm-up"),
              "table": table, "growth": growth, "warmup_wall_s": warmup, "all_wall_s": walls, "all_cpu_s": cpus,
              "profile": prof, **provenance()}

    print(f"{'config':10s} {'jobs':>6s} {'wall s':>7s} {'cpu s':>7s} {'wall/1k':>8s} {'cpu/1k':>7s} {'cpu/plain':>9s}")
    for v, row in table.items():
        print(f"{v:10s} {row['jobs']:6d} {row['wall_s']:7.2f} {row['cpu_s']:7.2f} {row['wall_s_per_1000_jobs']:8.2f} "
              f"{row['cpu_s_per_1000_jobs']:7.2f} {row['cpu_ratio_to_plain']:9.2f}")
    print(f"{hi} / ({max(counts) // min(counts)} x {lo}): wall {growth['wall_ratio_to_10x_one']:.2f}, "
          f"cpu {growth['cpu_ratio_to_10x_one']:.2f}; a model adds {growth['marginal_jobs_per_model']:.0f} jobs, "
          f"{growth['marginal_cpu_s_per_model']:.2f} CPU s ({growth['marginal_cpu_s_per_1000_jobs']:.2f} per 1,000 "
          f"jobs); CPU fit {growth['cpu_fit']['intercept_s']:.2f} + {growth['cpu_fit']['per_model_s']:.2f} x models, "
          f"largest residual {100 * growth['cpu_fit']['max_relative_residual']:.1f}%")
    if prof and "stage_share" in prof:
        print(f"profile of {prof['variant']} ({prof['samples']} samples):")
        for stage, share in prof["stage_share"].items():
            print(f"  {100 * share:5.1f}%  {stage}")
        print("  ours, inclusive:")
        for fn, share in list(prof["ours_top_share"].items())[:12]:
            print(f"  {100 * share:5.1f}%  {fn}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_models_dryrun.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
