"""boto3 clients for one account and region, made once each (an endpoint for a local stand-in)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import boto3

from workloads.common.aws_client import aws_client

# Account-wide questions (who am I, which regions are enabled) are asked here, so a region
# that is wrong or not enabled cannot pass for bad credentials.
FALLBACK_REGION = "us-east-1"
_OWN_PARTITION_PREFIXES = ("cn-", "us-gov-", "us-iso")


class AwsAccount:
    """The account the ambient credentials resolve to, in `region`. `endpoint_url` points every
    client at a local stand-in such as moto_server (tests and demos only)."""

    def __init__(
        self,
        region: str | None,
        endpoint_url: str | None = None,
        session: boto3.Session | None = None,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self._session = session
        self._clients: dict[str, Any] = {}
        self._account_wide: AwsAccount | None = None

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = aws_client(
                service, region=self.region or FALLBACK_REGION, endpoint_url=self.endpoint_url,
                session=self._session)
        return self._clients[service]

    def in_region(self, region: str | None) -> AwsAccount:
        """The same credentials and endpoint, in another region."""
        return AwsAccount(region, self.endpoint_url, self._session)

    def account_wide(self) -> AwsAccount:
        """Where to ask account-wide questions: the partition's main region."""
        region = self.region or ""
        if region == FALLBACK_REGION or region.startswith(_OWN_PARTITION_PREFIXES):
            return self
        if self._account_wide is None:
            self._account_wide = self.in_region(FALLBACK_REGION)
        return self._account_wide


def paginate(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[Any]:
    """Every item under `key` of every page of a boto3 list/describe call."""
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, [])


def tag_map(tags: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """EC2-style `[{"Key": k, "Value": v}]` tags as a dict."""
    return {tag["Key"]: tag.get("Value", "") for tag in tags or ()}
