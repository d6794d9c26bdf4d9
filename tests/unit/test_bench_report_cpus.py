"""BENCHMARKS.md says which CPU measured each results file, and each part of one rerun apart."""

from benchmarks.report import _cpus

INTEL, AMD = {"cpu": "Intel Xeon"}, {"cpu": "AMD EPYC"}


def test_a_part_not_rerun_keeps_its_cpu() -> None:
    # speed.json after `--only race` on another CPU: the file is stamped AMD, its bm25 part was measured on Intel.
    res = {"speed": {"machine": AMD, "bm25_machine": INTEL, "race_machine": AMD}, "minimal": {"machine": AMD}}
    (line,) = _cpus(res)
    assert "Intel Xeon: speed (bm25)" in line
    assert "AMD EPYC: minimal, speed (race)" in line


def test_one_cpu_needs_no_listing() -> None:
    assert _cpus({"speed": {"machine": AMD, "race_machine": AMD}, "minimal": {"machine": AMD}}) == []
