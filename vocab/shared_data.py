"""The shared data folder every Ray node of an experiment sees, by one name on AWS and on the lab.

On the spot cluster it is the stack's EFS file system, mounted read-write in every Ray pod
at SHARED_MOUNT_PATH; on a spot lab it is the lab's own folder. Either way a workload finds
it in the environment variable SHARED_ENV, and datasets staged there once (`invoke
data-put`) are read by every node, replacements included.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_ENV = "SPOTBURST_SHARED"
SHARED_MOUNT_PATH = "/mnt/shared"
"""Where every Ray pod of the spot cluster mounts the stack's EFS file system."""
SHARED_VOLUME = "shared"
"""The pod volume (and the PersistentVolumeClaim's suffix) holding the shared folder."""
STORAGE_EFS = "efs"
STORAGE_NONE = "none"
SHARED_STORAGE_KINDS = (STORAGE_EFS, STORAGE_NONE)
THROUGHPUT_MODES = ("elastic", "bursting")
"""elastic: pay per GB read and written, full speed at once; bursting: no transfer charge,
speed earned by the data stored (slow for a small file system)."""
INFREQUENT_ACCESS_DAYS = (1, 7, 14, 30, 60, 90, 180, 270, 365)
"""The ages EFS can move an untouched file to Infrequent Access at (its lifecycle policy)."""


def shared_folder() -> Path | None:
    """The shared folder of the node this runs on, or None when the cluster has none."""
    value = os.environ.get(SHARED_ENV)
    return Path(value) if value else None
