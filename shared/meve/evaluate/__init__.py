"""Prove it and tune it on your own data: evidence counted by the text the model reads, the top-k
frontier at equal tokens, paired bootstrap intervals and a deterministic dev/test split (the
method of the project's benchmarks, as a library)."""
