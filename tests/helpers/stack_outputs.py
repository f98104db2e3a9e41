"""Stack outputs shaped as `pulumi stack output --json [--show-secrets]` prints them for the
dev stack: the real stack program run offline, every value through JSON (the kubeconfig is a
JSON *string*, instance ids are lists in an object), secrets as "[secret]" unless shown."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.offline_cache import cached_run


def dev_stack_outputs(show_secrets: bool = True, **overrides: Any) -> dict[str, Any]:
    run = cached_run()
    outputs: dict[str, Any] = json.loads(json.dumps(run.outputs))
    if not show_secrets:
        outputs.update({key: "[secret]" for key in run.secret_outputs})
    return {**outputs, **overrides}
