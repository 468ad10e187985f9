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
    np.testing.assert_allclose(fl.max_flows(cap, target=0), want, rtol=1e-12, atol=1e-12)
