"""The one benchmark harness: the split registry (:mod:`.splits`), the data sets (:mod:`.data`,
:mod:`.conversations`), evidence-level metrics (:mod:`.metrics`), the systems compared
(:mod:`.arms`), leave-one-dataset-out selection (:mod:`.lodo`) and the shared plumbing
(:mod:`.corpus`, :mod:`.io`). Every benchmark in ``benchmarks/`` uses it."""
