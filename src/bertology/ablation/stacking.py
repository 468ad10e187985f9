"""What the sweep strategies and pruning share: a sequence classifier's outputs, configurations
stacked along the batch (how many, and the rows repeated for them), and the error of a strategy that has no plan
for a model.

Shapes: the glossary of :mod:`bertology.ablation.sweep`.
"""

from __future__ import annotations

import torch

from bertology.pipeline.config import ConfigError


def n_outputs(model) -> int:
    """K: the logits per example of a sequence classifier (its num_labels)."""
    return int(model.config.num_labels)



def plan_or_raise(plan):
    """A sweep's plan, or ConfigError with why it has none (`plan` the reason) and the naive sweep to run instead."""
    if isinstance(plan, str):
        raise ConfigError(f"{plan}. Run the naive sweep instead (config: ablation.sweep: naive); it gives the "
                          f"same outputs")
    return plan


def repeat_rows(x: torch.Tensor | None, k: int) -> torch.Tensor | None:
    """(N, ...) -> (k*N, ...), replica-major."""
    return None if x is None else x.repeat(k, *([1] * (x.ndim - 1)))


CPU_TOKEN_BUDGET = 4096


def effective_config_batch(config_batch: int, n_rows: int, length: int, device: torch.device) -> int:
    """How many configurations to stack along the batch on this device.

    Stacking fills a GPU; on a CPU a few thousand tokens already saturate the matrix products, and larger
    stacks only make the memory-bound steps (softmax over (k*N, H, T, T) scores, GELU, LayerNorm) spill
    out of cache, so there the stack is capped at CPU_TOKEN_BUDGET tokens (at least one configuration).
    """
    if config_batch < 1:
        raise ValueError("config_batch must be >= 1")
    if torch.device(device).type != "cpu":
        return config_batch
    return max(1, min(config_batch, CPU_TOKEN_BUDGET // max(1, n_rows * length)))
