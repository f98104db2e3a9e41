"""The burst experiment's vocabulary: sites, roles and their Ray labels.

Shared by the local two-site lab and the AWS burst stack; pure constants, no Ray, no Pulumi.
"""

from __future__ import annotations

SITE_ONPREM = "onprem"
SITE_CLOUD = "cloud"
SITES = (SITE_ONPREM, SITE_CLOUD)

ROLE_LOGIN = "login"
ROLE_HPC = "hpc"
ROLE_CLOUD = "cloud"
ROLES = (ROLE_LOGIN, ROLE_HPC, ROLE_CLOUD)
ROLE_SITE = {ROLE_LOGIN: SITE_ONPREM, ROLE_HPC: SITE_ONPREM, ROLE_CLOUD: SITE_CLOUD}

LABEL_SITE = "site"
LABEL_ROLE = "role"

TRANSFER_RESOURCE = "transfer_slot"
"""One unit on every non-head node: at most one data transfer runs on a node at a time."""


def peer_site(site: str) -> str:
    """The other site of the pair."""
    if site not in SITES:
        raise ValueError(f"site {site!r} is not one of {', '.join(SITES)}")
    return SITE_CLOUD if site == SITE_ONPREM else SITE_ONPREM


def site_of(role: str) -> str:
    if role not in ROLE_SITE:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    return ROLE_SITE[role]


def node_labels(role: str) -> dict[str, str]:
    """The Ray node labels of a burst node with this role."""
    return {LABEL_SITE: site_of(role), LABEL_ROLE: role}
