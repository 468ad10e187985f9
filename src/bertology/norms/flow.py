"""Token views from the top [CLS] position (Abnar & Zuidema 2020, *Quantifying Attention Flow in Transformers*;
docs/reference.md#token-views): raw attention, attention rollout and attention flow.

All take one example's attention without padding: alpha (L, H, n, n), rows summing to 1; the views score the n
input positions as seen from position `target` (0: [CLS]) of the last layer.

- raw: the last layer's head-averaged attention row of `target`;
- rollout: per layer A_l = 0.5 mean_h alpha_l + 0.5 I with rows renormalised (the residual connection), then
  R = A_L A_{L-1} ... A_1 and the score of input j is R[target, j];
- flow: the layered graph with nodes (l, t) for l = 0..L, an edge (l-1, j) -> (l, i) of capacity A_l[i, j]
  (the same residual-augmented A_l as rollout, as in the authors' code), and the score of input j is the
  maximum flow from (0, j) to (L, target) (networkx's preflow-push, its default maximum-flow algorithm, on one
  residual network reused for every j), divided by the sum over j (the
  authors' code normalises each output node's flows to sum to 1).
"""

from __future__ import annotations

import numpy as np


def residual_attention(alpha: np.ndarray) -> np.ndarray:
    """alpha (L, H, n, n) -> (L, n, n): 0.5 mean_h alpha + 0.5 I, rows renormalised to sum to 1."""
    a = np.asarray(alpha, dtype=np.float64).mean(axis=1)
    a = 0.5 * a + 0.5 * np.eye(a.shape[-1])[None]
    return a / a.sum(axis=-1, keepdims=True)


def rollout(alpha: np.ndarray) -> np.ndarray:
    """Attention rollout: alpha (L, H, n, n) -> R (n, n) = A_L ... A_1 (A of :func:`residual_attention`)."""
    a = residual_attention(alpha)
    out = a[0]
    for layer in a[1:]:
        out = layer @ out
    return out


def raw_scores(alpha: np.ndarray, target: int = 0) -> np.ndarray:
    """alpha (L, H, n, n) -> (n,): the last layer's head-averaged attention row of `target`."""
    return np.asarray(alpha[-1], dtype=np.float64).mean(axis=0)[target]


def rollout_scores(alpha: np.ndarray, target: int = 0) -> np.ndarray:
    """alpha (L, H, n, n) -> (n,): row `target` of the rollout (sums to 1)."""
    return rollout(alpha)[target]


def flow_graph(capacity: np.ndarray):
    """The layered attention graph: capacity (L, n, n) (row i of layer l = what (l, i) draws from layer l-1)
    -> networkx.DiGraph with nodes (l, t), l = 0..L, and edges (l-1, j) -> (l, i) of capacity capacity[l-1, i, j]
    (edges of zero capacity left out: they carry nothing)."""
    import networkx as nx

    L, n, _ = capacity.shape
    g = nx.DiGraph()
    g.add_nodes_from((l, t) for l in range(L + 1) for t in range(n))
    for l in range(1, L + 1):
        i, j = np.nonzero(capacity[l - 1] > 0)
        g.add_edges_from(((l - 1, int(b)), (l, int(a)), {"capacity": float(capacity[l - 1, a, b])})
                         for a, b in zip(i, j))
    return g


def max_flows(capacity: np.ndarray, target: int = 0) -> np.ndarray:
    """capacity (L, n, n) -> (n,): the maximum flow from each input node (0, j) to the top node (L, target)."""
    from networkx.algorithms.flow import build_residual_network, preflow_push

    L, n, _ = capacity.shape
    g = flow_graph(capacity)
    residual = build_residual_network(g, "capacity")  # built once, reset by each run (3x faster than per call)
    return np.array([preflow_push(g, (0, j), (L, target), residual=residual, value_only=True).graph["flow_value"]
                     for j in range(n)], dtype=np.float64)


def flow_scores(alpha: np.ndarray, target: int = 0) -> np.ndarray:
    """Attention flow: alpha (L, H, n, n) -> (n,) max flows through :func:`residual_attention`'s graph, normalised to
    sum to 1."""
    flows = max_flows(residual_attention(alpha), target)
    total = flows.sum()
    return flows / total if total > 0 else flows
