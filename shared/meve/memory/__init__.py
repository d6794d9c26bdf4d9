"""Momentary Contexts: chat turns stored verbatim (:mod:`~meve.memory.session`), what one handle
knows of them (:mod:`~meve.memory.log`), the pure selection (:mod:`~meve.memory.select`), one
rendering (:mod:`~meve.memory.render`) and the :class:`MomentaryMemory` façade. Imports core,
scoring and retrieval."""
