"""Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", sections 4.1-4.5 over the attention stores.

Modules: ``patterns`` (4.1), ``relations`` and ``framenet`` (4.2), ``cosine`` (4.3), ``features`` (4.4 and
4.5), ``reduce`` (the one-pass Dask driver over a store), ``figures`` and ``cli`` (the commands rules call).
"""
