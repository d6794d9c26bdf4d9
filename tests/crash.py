"""Crashes at a chosen point, for the tests of meve's append-only stores (run in a child process)."""

from __future__ import annotations

import os
import signal
from types import ModuleType


def die_halfway(module: ModuleType, file_name: str) -> None:
    """From now on, ``module``'s next append to ``file_name`` writes half its bytes and the process is
    SIGKILLed there, as a power cut or an OOM kill would leave it; other appends go through."""
    real = module.append_synced

    def half_then_die(path, data):  # type: ignore[no-untyped-def]
        if path.name == file_name:
            real(path, data[: len(data) // 2 + 1])
            os.kill(os.getpid(), signal.SIGKILL)
        real(path, data)

    module.append_synced = half_then_die  # type: ignore[attr-defined]
