"""Windows over a passage longer than a model's window (meve.scoring.windows): the pure parts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from meve.scoring.windows import Pieces, fits, owners, plan, stitch


def test_windows_cover_every_piece_open_at_word_starts_and_overlap():
    starts = [i % 3 == 0 for i in range(1000)]  # a word every three pieces
    spans = plan(starts, 254, 63)
    covered = np.zeros(1000, dtype=bool)
    for s, e in spans:
        assert 0 < e - s <= 254 and starts[s]
        covered[s:e] = True
    assert covered.all() and spans[0] == (0, 254) and spans[-1][1] == 1000
    for (_, e0), (s1, _) in itertools.pairwise(spans):
        assert e0 - s1 >= 63  # moved back to a word start, never forward past the overlap
    assert len(spans) == 5  # 1 + ceil((1000 - 254) / (254 - 63)) at most


def test_a_text_that_fits_is_one_window_and_a_word_longer_than_the_overlap_is_cut_inside():
    assert plan([True] * 10, 254, 63) == [(0, 10)]
    assert plan([], 254, 63) == [(0, 0)]
    spans = plan([True] + [False] * 599, 254, 63)  # one 600-piece "word" (a long URL, say)
    assert spans[0] == (0, 254) and spans[1][0] == 254 - 63 and spans[-1] == (600 - 254, 600)
    with pytest.raises(ValueError, match="overlap"):
        plan([True] * 10, 4, 4)


def test_each_piece_takes_the_window_it_sits_most_centrally_in():
    own = owners([(0, 10), (6, 16)], 16)
    # Pieces 6..9 are in both: 6 and 7 are deeper in the first window, 8 and 9 in the second.
    assert own.tolist() == [0] * 8 + [1] * 8
    with pytest.raises(ValueError, match="uncovered"):
        owners([(0, 4), (6, 10)], 10)


def test_stitching_keeps_one_row_per_piece_and_refuses_a_window_that_came_back_short():
    rows = [np.arange(10.0)[:, None], np.arange(100.0, 110.0)[:, None]]  # window w's row of piece i: 100 w + i - start
    out = stitch([(0, 10), (6, 16)], rows, 16)
    assert out[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 102, 103, 104, 105, 106, 107, 108, 109]
    with pytest.raises(RuntimeError, match="9 token vectors, not 10"):
        stitch([(0, 10), (6, 16)], [rows[0][:9], rows[1]], 16)


def test_word_starts_come_from_the_gaps_between_pieces_and_fits_never_undercounts():
    # "don't stop": don ' t stop -> only "don" and "stop" follow whitespace (or open the text)
    p = Pieces([1, 2, 3, 4], [(0, 3), (3, 4), (4, 5), (6, 10)])
    assert p.starts.tolist() == [True, False, False, True] and p.span(1, 3) == (3, 5)
    assert fits("a b", 4) and not fits("a b c", 4)
    assert not fits("\N{SMILING FACE WITH SMILING EYES}", 4)  # 4 UTF-8 bytes: maybe 4 byte-level pieces
