"""Would the default run go faster with one thread a job (two jobs at a time on 2 cores), and would it
give the same numbers? Re-runs one task's heavy jobs of a finished run with --threads 2 (what the run used) and
--threads 1, each in a fresh process, and compares what each wrote, byte for byte (JSON files excepted: they
carry timings).

The job commands are taken from the Snakemake output of that run (`snakemake --cores 2 ... > LOG 2>&1`, the
"Shell command:" lines), run in its directory with its inputs; the outputs go under --out/{2,1}/ instead.

    .venv/bin/python bench/bench_threads.py --run RUN_DIR --log RUN.log --task rte

Prints, per step: seconds at 2 and at 1 thread, their ratio, and whether the outputs are identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

STEPS = ("train_model", "score", "ablation_sweep", "ablation_pruning", "extract_attention", "norms_views")


def commands(log: Path, task: str) -> list[list[str]]:
    """The first shell command of each step in STEPS for `task`, as argv (the log redirection dropped)."""
    seen, out = set(), []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("Shell command: bertology "):
            continue
        argv = shlex.split(line[len("Shell command: "):].split(" > ")[0])
        if argv[1] in STEPS and argv[1] not in seen and f"task={task}" in argv:
            seen.add(argv[1])
            out.append(argv)
    return out


def with_threads(argv: list[str], n: int, out: Path) -> list[str]:
    argv = list(argv)
    for i, a in enumerate(argv[:-1]):
        if a == "--output":
            key, path = argv[i + 1].split("=", 1)
            argv[i + 1] = f"{key}={out / path}"
        elif a == "--threads":
            argv[i + 1] = str(n)
    return argv


def digests(root: Path) -> dict[str, str]:
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(root.rglob("*")) if f.is_file() and f.suffix != ".json"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="the finished run's directory (holds results/)")
    ap.add_argument("--log", type=Path, required=True, help="that run's Snakemake output")
    ap.add_argument("--task", default="rte")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_threads"))
    args = ap.parse_args()
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    print(f"load average at start {os.getloadavg()}")
    for argv in commands(args.log, args.task):
        seconds, files = {}, {}
        for n in (2, 1):
            out = args.out / str(n)
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            proc = subprocess.run(with_threads(argv, n, out), cwd=args.run, env=env, capture_output=True, text=True)
            seconds[n] = time.perf_counter() - t
            if proc.returncode:
                sys.exit(f"{argv[1]} failed:\n{proc.stderr[-3000:]}")
            files[n] = digests(out)
        differ = sorted(k for k in files[2].keys() | files[1].keys() if files[2].get(k) != files[1].get(k))
        print(f"{argv[1]:18s} 2 threads {seconds[2]:6.1f} s  1 thread {seconds[1]:6.1f} s  "
              f"({seconds[1] / seconds[2]:.2f}x)  identical: {not differ}" + (f"  differ: {differ[:4]}" if differ else ""),
              flush=True)
    print(f"load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
