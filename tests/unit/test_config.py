import pytest

from benchmarks.harness.splits import load_fitted
from meve import ConfigError, MemoryConfig, MeVeConfig


def test_defaults_follow_the_paper_except_where_dev_data_chose():
    cfg = MeVeConfig()
    assert (cfg.k_init, cfg.t_max, cfg.prioritisation) == (20, 512, "redundancy")
    # The rest is what benchmarks/context.py chose on the dev splits (its fitted record); the
    # paper has tau 0.5, no cut and n_min 3. Knobs that only act when another is on are compared then.
    chosen = next(r for r in load_fitted() if r.knob.startswith("MeVeConfig defaults")).value
    assert isinstance(chosen, dict)
    acting = ["candidates", "tau", "cut", "coverage", "n_min", "prune", "theta_redundancy"]
    acting += ["cut_ratio"] if chosen["cut"] == "ratio" else []
    acting += ["coverage_floor"] if chosen["coverage"] else []
    acting += ["prune_ratio", "prune_gate"] if chosen["prune"] != "none" else []
    assert {k: getattr(cfg, k) for k in acting} == {k: chosen[k] for k in acting}


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("k_init", 0, "int in [1, 10000]"),
        ("k_init", 2.5, "int >= 1"),
        ("k_init", True, "int >= 1"),
        ("tau", 1.5, "[0.0, 1.0]"),
        ("tau", float("nan"), "[0.0, 1.0]"),
        ("coverage", -0.1, "[0.0, 1.0]"),
        ("coverage_floor", 1.5, "[0.0, 1.0]"),
        ("prune_gate", -0.1, "[0.0, 1.0]"),
        ("n_min", -1, "int >= 0"),
        ("theta_redundancy", 0.0, "(0.0, 1.0]"),
        ("t_max", 0, "int >= 1"),
        ("prioritisation", "mmr", "'redundancy', 'novelty', 'none'"),
        ("retrieval", "sparse", "'dense', 'hierarchical'"),
        ("verify", "yes", "True or False"),
        ("neighbours", "next", "True or False"),
        ("neighbours", 1, "True or False"),
    ],
)
def test_bad_values_name_field_value_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError) as info:
        MeVeConfig(**{field: value})
    msg = str(info.value)
    assert field in msg and repr(value) in msg and allowed in msg
    assert isinstance(info.value, ValueError)


def test_neighbours_are_off_until_measured():
    # Issue 77 #2: benchmarks/long_neighbours.py chose it left out (every set left out chose on).
    assert MeVeConfig().neighbours is True and MeVeConfig(neighbours=False).neighbours is False


def test_replace_validates_keeps_zero_and_rejects_unknown():
    cfg = MeVeConfig()
    assert cfg.replace(tau=0.0).tau == 0.0
    assert cfg.replace(tau=None) is cfg
    with pytest.raises(ConfigError, match="t_max=-3"):
        cfg.replace(t_max=-3)
    with pytest.raises(ConfigError, match="tmax"):
        cfg.replace(tmax=10)


def test_unknown_keywords_are_refused_by_name_with_the_nearest_field():
    with pytest.raises(ConfigError, match=r"bogus=1 is not allowed: expected a keyword of MeVeConfig \(allowed: "):
        MeVeConfig(bogus=1)
    with pytest.raises(ConfigError, match=r"tua=0.3 is not allowed: expected a keyword of MeVeConfig \(did you mean 'tau'\?"):
        MeVeConfig(tua=0.3)
    with pytest.raises(ConfigError, match=r"lmax=5 .*\(did you mean 'l_max'\?"):
        MemoryConfig(lmax=5)
    with pytest.raises(ConfigError, match=r"t_mx=200 .*\(did you mean 't_max'\?"):
        MeVeConfig().replace(t_mx=200)


def test_memory_config_weights_and_fusion():
    assert MemoryConfig().weights == {"bm25": 0.5, "dense": 0.5}  # the documented default (BENCHMARKS.md, chosen by the memory LODO rule)
    assert MemoryConfig().dates == "auto"
    with pytest.raises(ConfigError, match="stemming=1"):
        MemoryConfig(stemming=1)
    with pytest.raises(ConfigError, match="fusion='sum'"):
        MemoryConfig(fusion="sum")
    with pytest.raises(ConfigError, match="sum is a finite number > 0"):
        MemoryConfig(weights={"bm25": 0.0, "dense": 0.0})
    with pytest.raises(ConfigError, match=r"weights\['bm25'\]=-1"):
        MemoryConfig(weights={"bm25": -1, "dense": 1})
    with pytest.raises(ConfigError, match="l_max=0"):
        MemoryConfig(l_max=0)


def test_model_constructors_validate_their_arguments():
    from meve import ConfigError, CrossEncoderScorer, SentenceTransformerEmbedder

    with pytest.raises(ConfigError, match="max_length"):
        CrossEncoderScorer("any", max_length=4)
    with pytest.raises(ConfigError, match="batch_size"):
        CrossEncoderScorer("any", batch_size=0)
    with pytest.raises(ConfigError, match="batch_size"):
        SentenceTransformerEmbedder(batch_size=True)
    assert CrossEncoderScorer("any", max_length=256, batch_size=8).max_length == 256  # nothing loads until first use


def test_configs_and_meve_take_keyword_arguments_only_and_check_their_types():
    from meve import InputError, MeVe
    from meve.retrieval.lexical import LexicalIndex

    with pytest.raises(TypeError):
        MeVeConfig(20)  # type: ignore[misc]
    with pytest.raises(TypeError):
        MemoryConfig(5)  # type: ignore[misc]
    with pytest.raises(TypeError):
        MeVe(None, LexicalIndex([], []))  # type: ignore[misc]
    with pytest.raises(InputError, match=r"store must be a meve PassageStore .*, got str"):
        MeVe(store="chroma", lexical=LexicalIndex([], []))  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"lexical must implement meve\.retrieval\.lexical\.Lexical \(e\.g\. a LexicalIndex\), got list"):
        MeVe(store=None, lexical=[])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="query_encoder must be a callable"):
        MeVe(store=None, lexical=LexicalIndex([], []), query_encoder="embed_query")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="follow_replicas must be True or False, got 'yes'"):
        MeVe(store=None, lexical=LexicalIndex([], []), follow_replicas="yes")  # type: ignore[arg-type]


def test_an_out_path_with_a_tilde_is_written_where_it_was_checked(monkeypatch, tmp_path):
    # Issue 78 (smaller): '--out=~/x' (no shell expansion) was checked as $HOME/x but written to ./~/x.
    from meve.cli import checks

    monkeypatch.setenv("HOME", str(tmp_path))
    assert checks.out_file("~/tuned.json") == str(tmp_path / "tuned.json")
    assert checks.out_folder("~/reports") == str(tmp_path / "reports")
