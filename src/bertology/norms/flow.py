"""Token views from the top [CLS] position (Abnar & Zuidema 2020, *Quantifying Attention Flow in Transformers*;
docs/reference.md#token-views): raw attention, attention rollout and attention flow.

All take one example's attention without padding: alpha (L, H, n, n), rows summing to 1; the views score the n
input positions as seen from position `target` (0: [CLS]) of the last layer.

- raw: the last layer's head-averaged attention row of `target`;
- rollout: per layer A_l = 0.5 mean_h alpha_l + 0.5 I with rows renormalised (the residual connection), then
  R = A_L A_{L-1} ... A_1 and the score of input j is R[target, j];
- flow: the layered graph with nodes (l, t) for l = 0..L, an edge (l-1, j) -> (l, i) of capacity A_l[i, j]
  (the same residual-augmented A_l as rollout, as in the authors' code), and the score of input j is the
  maximum flow from (0, j) to (L, target), divided by the sum over j (the authors' code normalises each output
  node's flows to sum to 1). The authors' code runs networkx's maximum flow (preflow-push); here the default
  solver is scipy's compiled Dinic (:func:`scipy_max_flows`, capacities scaled to integers, every flow
  certified within a bound it computes), and networkx's preflow-push is the named option ``method="networkx"``
  (:func:`networkx_max_flows`, the reference the tests compare with).
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


FLOW_METHODS = ("scipy", "networkx")


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


def networkx_max_flows(capacity: np.ndarray, target: int = 0) -> np.ndarray:
    """capacity (L, n, n) -> (n,): the maximum flow from each input node (0, j) to the top node (L, target) by
    networkx's preflow-push (what the authors' code runs; float arithmetic, one residual network reused for every
    j). The reference of :func:`scipy_max_flows`; about 100 times slower."""
    from networkx.algorithms.flow import build_residual_network, preflow_push

    L, n, _ = capacity.shape
    g = flow_graph(capacity)
    residual = build_residual_network(g, "capacity")  # built once, reset by each run (3x faster than per call)
    return np.array([preflow_push(g, (0, j), (L, target), residual=residual, value_only=True).graph["flow_value"]
                     for j in range(n)], dtype=np.float64)


def _layered_network(capacity: np.ndarray, target: int):
    """The graph of :func:`scipy_max_flows` as a CSR pattern: node 0 the source (input j; its n edges, to the nodes
    of layer 1, come first in the CSR data and are set per j), node 1 + (l-1) n + i the node (l, i) for
    l = 1..L-1, node 1 + (L-1) n the top node (L, target). The other nodes of layers 0 and L are left out: no flow
    from (0, j) reaches them or leaves them. Returns (indptr, indices, real capacities of the non-source edges
    (E,), their rows, number of nodes)."""
    L, n, _ = capacity.shape
    rows, cols, vals = [np.zeros(n, dtype=np.int64)], [1 + np.arange(n)], [np.zeros(n)]
    for l in range(1, L - 1):                                   # (l, j) -> (l+1, i), capacity A_{l+1}[i, j]
        i, j = np.nonzero(capacity[l] > 0)
        rows.append(1 + (l - 1) * n + j)
        cols.append(1 + l * n + i)
        vals.append(capacity[l, i, j])
    sink = 1 + (L - 1) * n
    k = np.flatnonzero(capacity[L - 1, target] > 0)             # (L-1, k) -> (L, target)
    rows.append(1 + (L - 2) * n + k)
    cols.append(np.full(len(k), sink))
    vals.append(capacity[L - 1, target, k])
    rows_a, cols_a, vals_a = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    order = np.lexsort((cols_a, rows_a))                          # row 0 (the source, columns 1..n) stays first
    rows_a, cols_a, vals_a = rows_a[order], cols_a[order], vals_a[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows_a, minlength=sink + 1))])
    return indptr, cols_a, vals_a, rows_a, sink + 1


def scipy_max_flows(capacity: np.ndarray, target: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """capacity (L, n, n), entries >= 0 -> (cut (n,), gap (n,)): the maximum flow f_j from each input node (0, j)
    to the top node (L, target) lies in [cut_j - gap_j, cut_j], by scipy's compiled Dinic
    (``scipy.sparse.csgraph.maximum_flow``), which takes integer (int32) capacities.

    Scaling and its error bound, proved: with S = 2^k the largest power of two with S * c_max <= 2^30 (c_max the
    largest capacity, edge sum into the top node or out of an input; S = 2^30 for attention, whose rows sum to
    1), each capacity c_e becomes the integer floor(S c_e), i.e. c'_e = floor(S c_e) / S in [c_e - 1/S, c_e].
    Dinic's integer maximum flow F_j is a flow of the network c' <= c, so lower_j = F_j / S <= f_j (feasible, hence
    at most the maximum). The nodes X reachable from the source in the integer problem's residual network define
    a cut C (edges from X to the rest) whose integer capacity is F_j (max-flow min-cut), so
    f_j <= c(C) = F_j / S + gap_j with gap_j = sum_{e in C} (c_e - c'_e) in [0, |C| / S). Returned: cut_j = c(C),
    the real capacity of that cut (float64 sum), and gap_j = c(C) - F_j / S, so f_j in [cut_j - gap_j, cut_j] holds
    for every call, whatever C's size (up to float64 rounding of the sums, about 1e-16). On MiniLM's attention of
    real MRPC text gap_j is at most 5e-7 at n = 56-64 and 1.2e-6 at n = 128; and C is in practice a minimum cut
    of the real network as well, so cut_j is f_j to float rounding (6e-16 from networkx there and on the tests'
    graphs, while F_j / S is off by gap_j).

    The graph (:func:`_layered_network`) is the attention graph less the nodes no flow from (0, j) can use: the
    other inputs (0, j') and the top layer's nodes other than `target`; it is built once per example, only the
    source's n edge capacities change with j."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    capacity = np.asarray(capacity, dtype=np.float64)
    L, n, _ = capacity.shape
    if (capacity < 0).any() or not np.isfinite(capacity).all():
        raise ValueError("flow capacities must be finite and >= 0: pass residual_attention(alpha) of attention maps")
    if L == 1:                                                  # (0, j) -> (1, target) is the only path
        return capacity[0, target].copy(), np.zeros(n)
    c_max = max(capacity.max(), capacity[0].sum(0).max(), capacity[L - 1, target].sum(), 1e-300)
    scale = 2.0 ** np.floor(np.log2(2.0 ** 30 / c_max))
    indptr, indices, vals, rows, size = _layered_network(capacity, target)
    ints = np.floor(vals * scale)
    data = ints.astype(np.int32)
    flow, gap = np.zeros(n), np.zeros(n)
    source_in = capacity[0].T                                   # (n inputs, n layer-1 nodes): A_1[i, j] at [j, i]
    for j in range(n):
        data[:n] = np.floor(source_in[j] * scale)
        vals[:n] = source_in[j]
        graph = sp.csr_array((data, indices, indptr), shape=(size, size))
        res = maximum_flow(graph, 0, size - 1, method="dinic")
        residual = (graph - res.flow).tocsr()
        residual.data = (residual.data > 0).astype(np.int8)
        residual.eliminate_zeros()
        reach = np.zeros(size, dtype=bool)
        reach[breadth_first_order(residual, 0, directed=True, return_predecessors=False)] = True
        cut = reach[rows] & ~reach[indices]
        flow[j] = vals[cut].sum()
        gap[j] = max(flow[j] - int(res.flow_value) / scale, 0.0)
    return flow, gap


def max_flows(capacity: np.ndarray, target: int = 0, method: str = "scipy") -> np.ndarray:
    """capacity (L, n, n) -> (n,): the maximum flow from each input node (0, j) to the top node (L, target);
    method "scipy" (:func:`scipy_max_flows`' certified cut capacity, within its gap of the exact value) or
    "networkx" (:func:`networkx_max_flows`)."""
    if method == "networkx":
        return networkx_max_flows(capacity, target)
    if method != "scipy":
        raise ValueError(f"flow method {method!r} is not one of {FLOW_METHODS}")
    return scipy_max_flows(capacity, target)[0]


def flow_scores(alpha: np.ndarray, target: int = 0, method: str = "scipy", tol: float = 1e-7) -> np.ndarray:
    """Attention flow: alpha (L, H, n, n) -> (n,) max flows through :func:`residual_attention`'s graph, normalised to
    sum to 1.

    With method "scipy" each flow f_j is known within [u_j - g_j, u_j] (:func:`scipy_max_flows`); the scores
    s'_j = u_j / U (U = sum_j u_j, G = sum_j g_j) then differ from the exact s_j = f_j / sum_j f_j by at most
    max(g_j / U, s'_j G / (U - G)): s'_j - s_j <= s'_j - (u_j - g_j) / U and s_j - s'_j <= u_j / (U - G) - s'_j.
    Where that bound exceeds `tol` the example is recomputed by networkx (not seen on attention: U >= 1, the
    flow from all inputs together being 1, in practice U is about 0.8 n, and the bound is 1-2e-8 on MiniLM's
    attention of real text at n = 56-128)."""
    if method not in FLOW_METHODS:
        raise ValueError(f"flow method {method!r} is not one of {FLOW_METHODS}")
    cap = residual_attention(alpha)
    if method == "scipy":
        flows, gap = scipy_max_flows(cap, target)
        total = flows.sum()
        slack = total - gap.sum()
        if slack > 0 and np.maximum(gap / total, flows / total * gap.sum() / slack).max() <= tol:
            return flows / total
    flows = networkx_max_flows(cap, target)
    total = flows.sum()
    return flows / total if total > 0 else flows
