"""Clark et al. 2019, *What Does BERT Look At?*: attention entropy (section 3.3) and heads as dependency
parsers (section 4.2), over the same attention stores as every other analysis.

- :mod:`bertology.clark.entropy`: per-query entropy of attention rows (nats), the [CLS] row, the uniform reference;
- :mod:`bertology.clark.parser`: word-level attention, each head's predicted syntactic head of every word in both
  directions, accuracy per relation against the fixed-offset baseline;
- :mod:`bertology.clark.reduce`: their kernel in the one read of a store (:mod:`bertology.attention.onepass`), entropy.csv and
  parser.csv, and the parser pass over a gold-syntax store;
- :mod:`bertology.clark.conllu`: gold Universal Dependencies trees (CoNLL-U) -> an attention sample and its words
  table, so gold sentences go through the same extraction and the same store schema;
- :mod:`bertology.clark.clark_figures`: entropy by layer, best head per relation against its baseline (Clark Fig. 5).
"""
