"""bertology: open up the self-attention heads of BERT-family encoders.

Reproduces Kovaleva et al. 2019 (*Revealing the Dark Secrets of BERT*) and Pande et al. 2021
(*The heads hypothesis*) on any Hugging Face encoder. See docs/reference.md for the reference.

Dimension glossary (used in every docstring):
    E  examples          L  layers            H  heads
    Q  query positions   K  key positions     (Q == K == max_length in a store)
    n  real length of one example, [CLS] and [SEP]s included
"""

__version__ = "0.1.0"
