"""Pande et al. 2021, *The heads hypothesis*: sieve bias scores and one-sided hypothesis tests per head.

Modules (docs/reference.md#sieve gives the definitions):

- :mod:`.masks`   pure numpy: the sieves S(t) and the query sets of every role for a chunk of examples;
- :mod:`.scores`  pure numpy: sieve bias beta(t) and per-example scores from attention and masks;
- :mod:`.reduce`  the sieve kernel of the one read of a store (bertology.attention.onepass); the t-tests; sieve.csv;
- :mod:`.summary` fine-tuned minus pretrained deltas, role shares, overlaps, Spearman correlations;
- :mod:`.figures` the paper's Figures 3-6.

The steps of rules/sieve.smk are in :mod:`bertology.steps.sieve`.

Dimension glossary: E examples, L layers, H heads, R roles, Q queries, K keys (Q = K = the store's
max_length), W words of an example, n an example's real length (specials included).
"""

from .masks import ROLES, SYNTACTIC_RELATIONS, roles_for

__all__ = ["ROLES", "SYNTACTIC_RELATIONS", "roles_for"]
