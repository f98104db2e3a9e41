"""What this process removed on its way out (a lab, a local Ray, a Ray job), so a task that
is interrupted can say so in one line: `interrupted: removed spot lab 3fa2b1 (5 nodes)`.

Whoever tears down something a task started notes it here; the task takes the notes when it
ends by Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_removed: list[str] = []


def note_removed(what: str) -> None:
    with _lock:
        _removed.append(what)


def take_removed() -> list[str]:
    """Everything noted since the last call, oldest first."""
    with _lock:
        taken = list(_removed)
        _removed.clear()
    return taken
