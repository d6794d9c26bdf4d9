"""MeVe's five phases: pure phase functions (:mod:`~meve.pipeline.phases`,
:mod:`~meve.pipeline.prune`), phase 1 (:mod:`~meve.pipeline.retrieve`), the one runner that calls
them in order and alone writes the trace (:mod:`~meve.pipeline.runner`), and the :class:`MeVe`
façade. Imports core, scoring, retrieval and mindref."""
