"""Runs one archive operation in a child process and ends the process abruptly after a step.

Used by the ARCH-2 crash tests (``crashing.py`` forks and calls :func:`run`; the file also
runs as a script for a fresh interpreter).  ``os._exit`` skips every cleanup — no ``finally``, no
rollback, no flush — which is as close to a power cut as a test can get without a VM.  The
seam is :class:`chatmem.store.archive.Archiver`'s documented ``on_step`` hook.

usage: crash_worker.py DATABASE_URL STATE_DIR STORAGE OPERATION USER_ID CONVERSATION_ID STEP
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from chatmem.store.archive import Archiver
from chatmem.store.db import Database

CRASHED = 86


def run(
    url: str,
    state_dir: str,
    storage: str,
    operation: str,
    user_id: str,
    conversation_id: str,
    step: str,
) -> int:
    """Run ``operation``; the process ends with CRASHED right after ``step``.  Returns 0 if
    the step was never reached."""

    def hook(name: str) -> None:
        if name == f"{operation}:{step}":
            os._exit(CRASHED)

    archiver = Archiver(Database(url), Path(state_dir), storage=storage, on_step=hook)  # type: ignore[arg-type]
    getattr(archiver, operation)(user_id, conversation_id)
    return 0


if __name__ == "__main__":
    sys.exit(run(*sys.argv[1:8]))
