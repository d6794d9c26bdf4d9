import meve


def test_public_api_is_pinned():
    assert sorted(meve.__all__) == sorted(
        [
            "BiEncoderScorer",
            "CachedEmbedder",
            "ConfigError",
            "ContextResult",
            "CrossEncoderScorer",
            "Dropped",
            "Embedder",
            "InputError",
            "LateInteractionScorer",
            "MeVe",
            "MeVeConfig",
            "MeVeError",
            "MemoryConfig",
            "MemoryContext",
            "MomentaryMemory",
            "Passage",
            "PhaseRecord",
            "RelevanceScorer",
            "SentenceTransformerEmbedder",
            "StoreError",
            "TokenCounter",
            "Turn",
            "default_embedder",
            "default_scorer",
            "get_token_counter",
            "make_scorer",
        ]
    )
    for name in meve.__all__:
        assert hasattr(meve, name), name


def test_errors_are_value_errors():
    assert issubclass(meve.MeVeError, ValueError)
    for cls in (meve.ConfigError, meve.InputError, meve.StoreError):
        assert issubclass(cls, meve.MeVeError)
