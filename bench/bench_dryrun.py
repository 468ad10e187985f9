"""Benchmark: `snakemake -n` and `snakemake --lint` on the default config against a one-rule Snakefile.

In one run, interleaved round by round (each a fresh `snakemake` process, wall time):
  one-rule   a Snakefile with one rule and no imports: the floor (Snakemake's own start-up and parse)
  this       this checkout's Snakefile on its embedded default config (config.yaml)
  ref        (--ref DIR) another checkout's Snakefile, e.g. a git worktree of main, with its own src/ on
             PYTHONPATH: the reference checkout's code in the same run

Every variant runs in its own fresh working directory (so nothing in results/ helps), after one warm-up
(the first run of a model decides once what the model allows and remembers it under .bertology/capability/;
`--cold` deletes that before every round to time the first dry run of a model too). Also lists the heavy
modules (torch, transformers, mlflow, xarray, zarr, dask, pandas, numpy, scipy) imported while reading this
Snakefile (`python -X importtime`).

    .venv/bin/python bench/bench_dryrun.py --repeats 5
    git worktree add /tmp/main-ref main && .venv/bin/python bench/bench_dryrun.py --ref /tmp/main-ref

Goal: this <= 2x one-rule, for `-n` and `--lint`. Writes bench/out/bench_dryrun.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
HEAVY = ("torch", "transformers", "mlflow", "xarray", "zarr", "dask", "pandas", "numpy", "scipy", "sklearn",
         "matplotlib", "spacy")
ONE_RULE = """rule all:
    output: "x.txt"
    shell: "echo > {output}"
"""


def snakemake_cmd(snakefile: Path, mode: str) -> list[str]:
    exe = Path(sys.executable).parent / "snakemake"
    cmd = [str(exe), "-s", str(snakefile), "--cores", "1"]
    return cmd + (["-n", "-q"] if mode == "dry" else ["--lint"])


def timed(cmd: list[str], cwd: Path, src: Path | None) -> float:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 and "--lint" not in cmd:  # --lint exits 1 when it has advice
        sys.exit(f"{' '.join(cmd)} failed in {cwd}:\n{proc.stderr[-2000:]}")
    return wall


def heavy_imports(snakefile: Path, cwd: Path, src: Path | None) -> list[str]:
    code = ("import sys; from snakemake.cli import main; "
            f"sys.argv=['snakemake','-s',{str(snakefile)!r},'-n','-q','--cores','1']; main()")
    env = dict(os.environ, **({"PYTHONPATH": str(src)} if src else {}))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".")[0] in HEAVY:
                found.add(name.split(".")[0])
    return sorted(found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ref", type=Path, help="another checkout (e.g. a worktree of main) to time in the same run")
    ap.add_argument("--modes", default="dry,lint", help="dry,lint")
    ap.add_argument("--cold", action="store_true", help="forget the remembered model decisions every round")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_dryrun_"))
    (tmp / "one").mkdir()
    (tmp / "one" / "Snakefile").write_text(ONE_RULE)
    variants = {"one-rule": (tmp / "one" / "Snakefile", None), "this": (REPO / "Snakefile", REPO / "src")}
    if args.ref is not None:
        variants["ref"] = (args.ref.resolve() / "Snakefile", args.ref.resolve() / "src")
    modes = args.modes.split(",")
    times: dict[str, dict[str, list[float]]] = {m: {v: [] for v in variants} for m in modes}
    try:
        for name, (snakefile, src) in variants.items():
            (tmp / name).mkdir(exist_ok=True)
            timed(snakemake_cmd(snakefile, "dry"), tmp / name, src)  # warm-up (disk cache, remembered decisions)
        for _ in range(args.repeats):
            for mode in modes:
                for name, (snakefile, src) in variants.items():
                    if args.cold:
                        shutil.rmtree(tmp / name / ".bertology", ignore_errors=True)
                    times[mode][name].append(timed(snakemake_cmd(snakefile, mode), tmp / name, src))
        heavy = {name: heavy_imports(sf, tmp / name, src) for name, (sf, src) in variants.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    result = {"repeats": args.repeats, "cold": args.cold, "load_average": os.getloadavg(), "modes": {},
              "heavy_imports": heavy}
    for mode in modes:
        med = {v: statistics.median(t) for v, t in times[mode].items()}
        result["modes"][mode] = {"median_s": med, "all_s": times[mode],
                                 "ratio_to_one_rule": {v: med[v] / med["one-rule"] for v in med}}
        print(f"{mode:5s} " + "  ".join(f"{v} {med[v]:.2f}s ({med[v] / med['one-rule']:.2f}x)" for v in med))
    print("heavy modules imported while reading the Snakefile (one-rule: Snakemake's own):", heavy)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_dryrun.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
