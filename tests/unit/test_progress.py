"""Progress where stderr is not a terminal: lines with done/total, rate and ETA, never tqdm's redraws."""

from __future__ import annotations

import io

from meve.core.progress import LineProgress, progress_bar


def test_a_line_every_interval_with_done_total_and_eta_and_one_when_closed():
    now = [100.0]
    out = io.StringIO()
    bar = LineProgress(1000, desc="meve: embedding", unit="passage", every=10.0, clock=lambda: now[0], stream=out)
    now[0] += 4.0
    bar.update(100)  # before the interval: no line
    assert out.getvalue() == ""
    now[0] += 6.0
    bar.update(150)  # 250 in 10 s: 25 a second, 750 left
    now[0] += 5.0
    bar.update(250)  # within the interval of the last line
    now[0] += 15.0
    bar.close()
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "meve: embedding: 250/1000 passages (25%), 0:00:10 elapsed, 25.0 passages/s, ETA 0:00:30",
        "meve: embedding: 500/1000 passages, done in 0:00:30, 16.7 passages/s",
    ]


def test_progress_bar_writes_lines_to_a_redirected_stderr_and_nothing_when_not_asked(capsys):
    with progress_bar(3, desc="meve: reading", unit="file", show=True) as bar:
        bar.update(3)
    err = capsys.readouterr().err
    assert err.startswith("meve: reading: 3/3 files, done in ") and err.count("\n") == 1
    with progress_bar(3, desc="meve: reading", unit="file", show=False) as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""
