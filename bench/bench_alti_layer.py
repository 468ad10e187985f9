"""One layer's ALTI arithmetic on the same random tensors: the pre-norm layer's (bertology.norms.alti_prenorm) against
the post-LN pass ALTI shares with GlobEnc (bertology.norms.alti_globenc), per hidden size D (heads H) and n tokens,
best of 2 x --repeats calls, interleaved, torch threads --threads (docs/reference.md#alti-prenorm, Cost).

    flock -x /tmp/bertology-cpu.lock env PYTHONPATH=src .venv/bin/python bench/bench_alti_layer.py
"""

from __future__ import annotations

import argparse
import time

import torch

from bertology.norms.alti_globenc import alti_globenc_layer
from bertology.norms.alti_prenorm import prenorm_alti_layer


def best(fn, repeats: int) -> float:
    """The fastest of `repeats` calls, in ms."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return 1e3 * min(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for D, H in ((384, 12), (576, 9), (768, 12)):
        for n in (64, 128):
            alpha, f = torch.softmax(torch.randn(H, n, n), -1), torch.randn(H, n, D)
            x, b, y = torch.randn(n, D), torch.randn(D), torch.randn(n, D)
            ln1, ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)

            def post():
                return alti_globenc_layer(alpha, f, x, b, ln1, y, ln2, x)

            def pre():
                return prenorm_alti_layer(alpha, f, x, b)

            t_post, t_pre = best(post, args.repeats), best(pre, args.repeats)
            t_post, t_pre = min(t_post, best(post, args.repeats)), min(t_pre, best(pre, args.repeats))
            print(f"D={D} H={H} n={n}: pre-norm ALTI {t_pre:.1f} ms, post-LN ALTI + GlobEnc {t_post:.1f} ms")


if __name__ == "__main__":
    main()
