"""Raw attention, rollout and flow (bertology.norms.flow) on inputs whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from bertology.norms import flow as fl


def test_rollout_of_identity_attention_is_the_identity():
    alpha = np.broadcast_to(np.eye(5), (3, 4, 5, 5))
    np.testing.assert_allclose(fl.rollout(alpha), np.eye(5))
    np.testing.assert_allclose(fl.rollout_scores(alpha), np.eye(5)[0])


def test_rollout_multiplies_the_residual_augmented_layers():
    rng = np.random.default_rng(0)
    alpha = rng.dirichlet(np.ones(4), size=(2, 3, 4))                                  # (L=2, H=3, 4, 4)
    a = [0.5 * alpha[l].mean(0) + 0.5 * np.eye(4) for l in range(2)]
    np.testing.assert_allclose(fl.rollout(alpha), a[1] @ a[0])
    np.testing.assert_allclose(fl.rollout(alpha).sum(-1), np.ones(4))
    np.testing.assert_allclose(fl.raw_scores(alpha, 0), alpha[1].mean(0)[0])


def test_max_flow_on_a_hand_drawn_graph():
    # 2 layers, 3 tokens; capacity[l, i, j] = edge (l, j) -> (l+1, i).
    # layer 1 draws: node 0 <- {0: .5, 1: .5}; node 1 <- {1: .2, 2: .8}; node 2 <- {2: 1}
    # layer 2: top node 0 <- {0: .3, 1: .7}
    cap = np.zeros((2, 3, 3))
    cap[0, 0, 0], cap[0, 0, 1] = 0.5, 0.5
    cap[0, 1, 1], cap[0, 1, 2] = 0.2, 0.8
    cap[0, 2, 2] = 1.0
    cap[1, 0, 0], cap[1, 0, 1] = 0.3, 0.7
    # by hand: input 0 reaches the top only via (1,0): min(.5, .3) = .3
    # input 1: via (1,0) min(.5, .3) = .3, plus via (1,1) min(.2, .7) = .2 -> .5
    # input 2: via (1,1): min(.8, .7) = .7; (1,2) has no edge to the top -> .7
    np.testing.assert_allclose(fl.max_flows(cap, target=0), [0.3, 0.5, 0.7])
    # another target: top node 2 has no incoming edge -> nothing flows
    np.testing.assert_allclose(fl.max_flows(cap, target=2), [0.0, 0.0, 0.0])


def test_flow_scores_are_normalised_and_follow_the_residual_graph():
    alpha = np.broadcast_to(np.eye(4), (2, 2, 4, 4))                                   # identity: only j = target flows
    np.testing.assert_allclose(fl.flow_scores(alpha, target=0), [1, 0, 0, 0])
    rng = np.random.default_rng(1)
    alpha = rng.dirichlet(np.ones(5), size=(3, 2, 5))
    s = fl.flow_scores(alpha)
    assert s.shape == (5,) and s.sum() == pytest.approx(1.0) and (s >= 0).all()


def test_one_layer_flow_equals_the_capacity_into_the_target():
    rng = np.random.default_rng(2)
    alpha = rng.dirichlet(np.ones(4), size=(1, 3, 4))
    a = fl.residual_attention(alpha)[0]
    np.testing.assert_allclose(fl.max_flows(a[None], target=1), a[1])


def test_reusing_one_residual_network_gives_networkx_maximum_flow_value():
    import networkx as nx

    rng = np.random.default_rng(3)
    cap = fl.residual_attention(rng.dirichlet(np.full(7, 0.3), size=(3, 2, 7)))
    g = fl.flow_graph(cap)
    want = [nx.maximum_flow_value(g, (0, j), (3, 0)) for j in range(7)]
    np.testing.assert_allclose(fl.max_flows(cap, target=0, method="networkx"), want, rtol=1e-12, atol=1e-12)


def _attention(rng, L, H, n, temperature, zeros=0.0):
    logits = rng.normal(size=(L, H, n, n)) * temperature
    alpha = np.exp(logits - logits.max(-1, keepdims=True))
    alpha[rng.random(alpha.shape) < zeros] = 0.0                                     # masked keys: exact zeros
    alpha[..., 0] += 1e-3                                                              # no all-zero row
    return alpha / alpha.sum(-1, keepdims=True)


@pytest.mark.parametrize("L, n, temperature, zeros", [(1, 6, 1.0, 0.0), (2, 3, 1.0, 0.0), (3, 9, 3.0, 0.3),
                                                      (4, 17, 8.0, 0.0), (6, 24, 2.0, 0.5), (2, 40, 0.0, 0.0)])
def test_scipy_flows_equal_networkx_preflow_push(L, n, temperature, zeros):
    # temperature 0: uniform attention (every capacity tied); zeros: edges of capacity 0 left out of both graphs
    rng = np.random.default_rng(L * 100 + n)
    alpha = _attention(rng, L, 2, n, temperature, zeros)
    cap = fl.residual_attention(alpha)
    for target in (0, n - 1):
        want = fl.networkx_max_flows(cap, target)
        got, gap = fl.scipy_max_flows(cap, target)
        assert (gap >= 0).all() and gap.max() < 1e-6
        assert (want <= got + 1e-12).all() and (want >= got - gap - 1e-12).all()     # the certified interval
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(fl.max_flows(cap, target), got)
        np.testing.assert_allclose(fl.flow_scores(alpha, target), fl.flow_scores(alpha, target, method="networkx"),
                                   rtol=0, atol=1e-6)


def test_flow_scores_fall_back_to_networkx_beyond_the_tolerance():
    rng = np.random.default_rng(5)
    alpha = _attention(rng, 3, 2, 8, 2.0)
    exact = fl.flow_scores(alpha, method="networkx")
    np.testing.assert_array_equal(fl.flow_scores(alpha, tol=0.0), exact)              # bound > 0: networkx's numbers
    with pytest.raises(ValueError, match="not one of"):
        fl.flow_scores(alpha, method="ortools")
    with pytest.raises(ValueError, match=">= 0"):
        fl.scipy_max_flows(-fl.residual_attention(alpha))
