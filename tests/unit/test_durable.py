"""write_atomically: the old file or the new one, never half of one, and no temporary file left by a writer that raised."""

from __future__ import annotations

import pytest

from meve.core.durable import TMP_MARK, write_atomically


def test_a_writer_that_raises_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "state.json"
    write_atomically(path, b"old")

    def dies(fh):
        fh.write(b"half of the new")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        write_atomically(path, dies)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"] and not any(TMP_MARK in p.name for p in tmp_path.iterdir())
    write_atomically(path, lambda fh: fh.write(b"new"))
    assert path.read_bytes() == b"new"
