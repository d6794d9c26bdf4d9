"""Where candidates come from: BM25 kernels and the lexical index, score fusion, Chroma clients
and the passage store. Imports only :mod:`meve.core`; loads no model."""
