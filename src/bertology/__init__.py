"""bertology: open up the self-attention heads of BERT-family encoders.

Reproduces Kovaleva et al. 2019 (*Revealing the Dark Secrets of BERT*) and Pande et al. 2021
(*The heads hypothesis*) on any Hugging Face encoder. See docs/reference.md for the reference.

Dimension glossary (used in every docstring):
    E  examples          L  layers            H  heads
    Q  query positions   K  key positions     (Q == K == max_length in a store)
    n  real length of one example, [CLS] and [SEP]s included
"""

import os as _os

# OpenBLAS's threads spin for about 2**28 cycles (a tenth of a second) after every product they share before they
# sleep: between the sieve's products they kept a core busy doing nothing, taken from the other Dask worker. With 2**4
# cycles they sleep at once (the products themselves, their threads and their sums, are unchanged). Read by OpenBLAS
# when numpy loads: it takes effect in every bertology command and job, and in a notebook that imports bertology
# before numpy; a value set by the user is kept (docs/reference.md#performance).
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"
