"""What embeds and what scores: the Protocols, the bundled models (loaded lazily, once per
process, through one registry) and :mod:`~meve.scoring.resolve`, the one place that maps a
``scorer=`` to how a MeVe runs it. Imports only :mod:`meve.core`."""
