"""MindRef: documents first, then the exact passage (the document stage, sentence windows,
exact localisation). Imports core, scoring and retrieval."""
