"""The first-boot script of a burst node: install the pinned Ray, mount the site's EFS by IP,
record the node's role and run Ray under systemd (so a reboot restarts it) with token auth:
every `ray start` runs with RAY_AUTH_MODE=token and the stack's token, read from its SSM
SecureString parameter at each start and held only in the Ray process's environment."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from vocab.burst import ROLE_LOGIN, site_of
from vocab.ports import GCS_PORT
from vocab.ray_start import ray_start_args

VENV = "/opt/spotburst/venv"
SHARE = "/home/ec2-user/share"
NODE_FILE = "/etc/spotburst/node.json"
RAY_SERVICE = "spotburst-ray.service"
HEAD_CPUS = 2  # the login node coordinates; compute runs on HPC workers and cloud nodes
NFS_OPTIONS = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"
_NODE_IP = "__NODE_IP__"


@dataclass
class NodeBoot:
    role: str
    num_cpus: int
    efs_mount_ip: str
    packages: list[str]
    token_parameter: str
    """SSM SecureString parameter holding the cluster's Ray token."""
    region: str
    head_ip: str | None = None  # None on the login node, which is the head


def ray_start_line(boot: NodeBoot) -> str:
    """The node's `ray start --block` command; the node's IP is read from IMDSv2 at start."""
    head_address = None if boot.role == ROLE_LOGIN else f"{boot.head_ip}:{GCS_PORT}"
    args = ray_start_args(
        boot.role, node_ip=_NODE_IP, num_cpus=boot.num_cpus, head_address=head_address, block=True
    )
    args[0] = f"{VENV}/bin/ray"
    return shlex.join(args).replace(_NODE_IP, '"$NODE_IP"')


def render_user_data(boot: NodeBoot) -> str:
    node = json.dumps({"role": boot.role, "site": site_of(boot.role)})
    packages = shlex.join(boot.packages)
    return f"""#!/bin/bash
# spotburst burst node: role {boot.role}
set -euo pipefail
mkdir -p /etc/spotburst
cat > {NODE_FILE} <<'NODE'
{node}
NODE
# iproute-tc and sch_netem (kernel-modules-extra) let `invoke netem` shape this node's link.
dnf install -y python3.11 nfs-utils iproute-tc "kernel-modules-extra-$(uname -r)"
python3.11 -m venv {VENV}
{VENV}/bin/pip install --no-cache-dir {packages}

install -d -o ec2-user -g ec2-user {SHARE}
echo '{boot.efs_mount_ip}:/ {SHARE} nfs4 {NFS_OPTIONS} 0 0' >> /etc/fstab
mount {SHARE}
chown ec2-user:ec2-user {SHARE}

cat > /opt/spotburst/start-ray <<'START'
#!/bin/bash
set -euo pipefail
IMDS=http://169.254.169.254/latest
TOKEN=$(curl -sf -X PUT "$IMDS/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
NODE_IP=$(curl -sf -H "X-aws-ec2-metadata-token: $TOKEN" "$IMDS/meta-data/local-ipv4")
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$(aws ssm get-parameter --region {boot.region} \\
  --name {shlex.quote(boot.token_parameter)} --with-decryption \\
  --query Parameter.Value --output text)
export RAY_AUTH_TOKEN
exec {ray_start_line(boot)}
START
chmod 755 /opt/spotburst/start-ray

cat > /etc/systemd/system/{RAY_SERVICE} <<'UNIT'
[Unit]
Description=Ray node (spotburst {boot.role})
Wants=network-online.target
After=network-online.target remote-fs.target

[Service]
User=ec2-user
Environment=HOME=/home/ec2-user
ExecStart=/opt/spotburst/start-ray
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now {RAY_SERVICE}
"""
