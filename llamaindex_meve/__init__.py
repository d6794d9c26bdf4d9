"""LlamaIndex adapters for meve (node postprocessors, retriever, chat memory): not written yet.

The package exists so the distribution layout is final; see the open LlamaIndex issue.
"""

__all__: list[str] = []
