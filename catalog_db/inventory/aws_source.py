"""AWS inventory: GPU instance types per region, their prices, and how many the account may run.

Calls, per configured region r (all read-only; IAM: ec2:Describe*, pricing:GetProducts,
servicequotas:GetServiceQuota, optionally ec2:GetSpotPlacementScores):
  1. ec2.describe_instance_type_offerings(LocationType='availability-zone'): types each zone
     offers; the P and G/VT families are kept (filtered here: moto does not match wildcards).
  2. ec2.describe_instance_types: keeps types with `GpuInfo` (GPU name, count, MiB per GPU)
     and reads their default vCPUs.
  3. ec2.describe_spot_price_history(StartTime=now, 'Linux/UNIX'): latest price per type and
     zone; the row's price is the cheapest zone's, named in the provenance.
  4. pricing.get_products (endpoint region us-east-1, the Price List API's home): on-demand
     Linux, shared tenancy, no pre-installed software, capacitystatus Used, per region.
  5. service-quotas.get_service_quota: vCPU quotas of the P and G/VT groups, on demand and spot
     (codes in catalog_db/data/inventory/aws_quota_codes.csv, with their source).
  6. ec2.describe_instances (pending, running): vCPUs already used per group and pricing class.

Available machines of type i, pricing c = floor(max(0, quota(g(i), c) − used(g(i), c)) / vCPUs(i)).
A quota is shared by every type of its group, so each row says what that type could use alone;
summing rows of one group overstates the total (the schema has no quota-group table yet).
Rows are per region (zone ''): quotas and on-demand prices are regional, and a per-zone copy
of a regional count would be summed by `snapshots.offers`.

A failure in one region (or of prices/quotas only) becomes a warning and a 'partial' snapshot;
when every region fails the read raises InventoryReadError with a plain message. Credentials come
from the standard chain (or a given boto3 Session); retries use botocore's 'standard' mode.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from catalog_db.inventory.base_source import (
    InventoryItem,
    InventoryRead,
    InventoryReadError,
    SourceName,
)
from catalog_db.inventory.gpu_names import CatalogReference
from planning.domain import Pricing

log = logging.getLogger(__name__)

ClientFactory = Callable[[str, str], Any]  # (service name, region) -> boto3 client

PRICING_REGION = "us-east-1"  # the Price List API is served from us-east-1 (and ap-south-1)
_THROTTLING = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthFailure"}
_ACCESS_KEY = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{12,}\b")


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """What describe_instance_types says about one instance type."""

    instance_type: str
    vcpus: int
    gpu_name: str | None
    gpu_count: int
    gpu_memory_mib: float
    gpu_partition: float  # 1.0 = whole GPUs; <1 = fractional GPU slices


@dataclass(frozen=True, slots=True)
class SpotQuote:
    price_usd_per_hr: float
    zone: str
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class RegionRead:
    items: tuple[InventoryItem, ...]
    warnings: tuple[str, ...]
    offered_types: int


def quota_group(instance_type: str) -> str | None:
    """'P' for P families, 'G' for G and VT families (AWS's vCPU quota groups), else None."""
    family = instance_type.split(".")[0]
    if family.startswith("p"):
        return "P"
    if family.startswith(("g", "vt")):
        return "G"
    return None


def read_quota_codes(path: Path | None = None) -> dict[tuple[str, Pricing], str]:
    """(group, pricing) -> Service Quotas code, from the bundled data file."""
    default = resources.files("catalog_db").joinpath("data/inventory/aws_quota_codes.csv")
    with (path or Path(str(default))).open(newline="", encoding="utf-8") as handle:
        return {
            (row["family_group"], Pricing(row["pricing"])): row["quota_code"]
            for row in csv.DictReader(handle)
        }


# Errors: plain text, never secrets ------------------------------------------------------------


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every known secret and anything shaped like an access key id masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _ACCESS_KEY.sub("***", text)


def plain_error(error: Exception, secrets: Sequence[str] = ()) -> str:
    """One line saying what failed and why, for logs and the catalog."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", "Unknown"))
        message = str(error.response.get("Error", {}).get("Message", ""))
        hint = ""
        if code in _DENIED:
            hint = " (the credentials lack permission for this call)"
        elif code in _THROTTLING:
            hint = " (throttled; gave up after botocore's retries)"
        text = f"AWS {error.operation_name} failed: {code}{hint}: {message}"
    else:
        text = f"AWS call failed: {type(error).__name__}: {error}"
    return redact(text, secrets)[:500]


# Clients ------------------------------------------------------------------------------------


def retry_config(max_attempts: int, connect_timeout_s: float, read_timeout_s: float) -> Config:
    return Config(
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
    )


def session_clients(
    session: boto3.Session, endpoint_url: str | None, config: Config
) -> ClientFactory:
    """A factory that makes (and reuses) one client per service and region."""
    cache: dict[tuple[str, str], Any] = {}

    def client(service: str, region: str) -> Any:
        if (service, region) not in cache:
            cache[(service, region)] = session.client(
                service, region_name=region, endpoint_url=endpoint_url, config=config
            )
        return cache[(service, region)]

    return client


def session_secrets(session: boto3.Session) -> tuple[str, ...]:
    """The resolved credentials' strings (for redaction); raises if the chain finds none."""
    try:
        credentials = session.get_credentials()
    except BotoCoreError as error:
        raise InventoryReadError(plain_error(error)) from None
    if credentials is None:
        raise InventoryReadError(
            "no AWS credentials found (standard chain: environment, shared config and "
            "credentials files, SSO, container or instance role)"
        )
    frozen = credentials.get_frozen_credentials()
    return tuple(s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s)


# EC2 reads ------------------------------------------------------------------------------------


def _chunks(values: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def gpu_family_offerings(ec2: Any) -> dict[str, tuple[str, ...]]:
    """Instance type -> zones offering it, for the P and G/VT families."""
    zones: dict[str, set[str]] = {}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone"
    )
    for page in pages:
        for offering in page["InstanceTypeOfferings"]:
            if quota_group(offering["InstanceType"]):
                zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return {t: tuple(sorted(z)) for t, z in sorted(zones.items())}


def _spec(info: dict[str, Any]) -> MachineSpec:
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    first = gpus[0] if gpus else {}
    return MachineSpec(
        instance_type=info["InstanceType"],
        vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
        gpu_name=first.get("Name"),
        gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
        gpu_memory_mib=float(first.get("MemoryInfo", {}).get("SizeInMiB", 0)),
        gpu_partition=float(first.get("GpuPartitionSize", 1.0)),
    )


def instance_specs(ec2: Any, instance_types: Sequence[str]) -> dict[str, MachineSpec]:
    """Specs of the given types (100 per call, the API's limit)."""
    specs: dict[str, MachineSpec] = {}
    for chunk in _chunks(instance_types, 100):
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=chunk):
            specs.update({i["InstanceType"]: _spec(i) for i in page["InstanceTypes"]})
    return specs


def latest_spot_prices(
    ec2: Any, instance_types: Sequence[str], now: datetime
) -> dict[str, SpotQuote]:
    """Per type, the cheapest zone's latest Linux spot price (USD per machine-hour)."""
    latest: dict[tuple[str, str], SpotQuote] = {}
    for chunk in _chunks(instance_types, 100):
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=chunk, ProductDescriptions=["Linux/UNIX"], StartTime=now
        )
        for page in pages:
            for row in page["SpotPriceHistory"]:
                quote = SpotQuote(
                    float(row["SpotPrice"]), row["AvailabilityZone"], row["Timestamp"]
                )
                key = (row["InstanceType"], quote.zone)
                if quote.price_usd_per_hr > 0 and (
                    key not in latest or quote.timestamp > latest[key].timestamp
                ):
                    latest[key] = quote
    cheapest: dict[str, SpotQuote] = {}
    for (instance_type, _), quote in sorted(latest.items()):
        best = cheapest.get(instance_type)
        if best is None or quote.price_usd_per_hr < best.price_usd_per_hr:
            cheapest[instance_type] = quote
    return cheapest


def running_counts(ec2: Any) -> dict[tuple[str, Pricing], int]:
    """(instance type, pricing) -> pending or running instances of the P and G/VT groups."""
    counts: dict[tuple[str, Pricing], int] = {}
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                if not quota_group(instance["InstanceType"]):
                    continue
                spot = instance.get("InstanceLifecycle") == "spot"
                key = (instance["InstanceType"], Pricing.SPOT if spot else Pricing.ON_DEMAND)
                counts[key] = counts.get(key, 0) + 1
    return counts


# Prices and quotas ----------------------------------------------------------------------------


def parse_price_list_item(document: str) -> tuple[str, str, float] | None:
    """(instance type, region code, USD per hour) from one Price List JSON string, or None when
    it is not a shared-tenancy Linux on-demand hourly price (AWS's documented aws_v1 format)."""
    item = json.loads(document)
    attributes = item.get("product", {}).get("attributes", {})
    wanted = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA"}
    if any(attributes.get(k) != v for k, v in wanted.items()):
        return None
    if attributes.get("capacitystatus", "Used") != "Used":
        return None
    prices = [
        float(dimension["pricePerUnit"]["USD"])
        for term in item.get("terms", {}).get("OnDemand", {}).values()
        for dimension in term.get("priceDimensions", {}).values()
        if dimension.get("unit") == "Hrs" and float(dimension["pricePerUnit"].get("USD", 0)) > 0
    ]
    if not prices or "instanceType" not in attributes:
        return None
    return attributes["instanceType"], attributes.get("regionCode", ""), min(prices)


def on_demand_prices(pricing: Any, region: str, instance_types: Sequence[str]) -> dict[str, float]:
    """Instance type -> on-demand USD per machine-hour in `region` (Price List API).

    ANY_OF takes a comma-separated list of values (Price List API filter types, 2025)."""
    prices: dict[str, float] = {}
    for chunk in _chunks(instance_types, 50):
        filters = [
            {"Type": "ANY_OF", "Field": "instanceType", "Value": ",".join(chunk)},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
            {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
            {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
            {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
        ]
        pages = pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"
        )
        for page in pages:
            for document in page["PriceList"]:
                parsed = parse_price_list_item(document)
                if parsed and parsed[1] in (region, "") and parsed[0] in chunk:
                    prices[parsed[0]] = min(parsed[2], prices.get(parsed[0], math.inf))
    return prices


def quota_vcpus(
    quotas: Any, codes: dict[tuple[str, Pricing], str]
) -> dict[tuple[str, Pricing], float]:
    """(group, pricing) -> the account's vCPU quota in the client's region."""
    return {
        key: float(quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        for key, code in sorted(codes.items())
    }


def spot_placement_scores(ec2: Any, region: str, instance_types: Sequence[str]) -> dict[str, int]:
    """Instance type -> spot placement score (1-10) for one machine in `region`."""
    scores: dict[str, int] = {}
    for instance_type in instance_types:
        response = ec2.get_spot_placement_scores(
            InstanceTypes=[instance_type], TargetCapacity=1, RegionNames=[region]
        )
        for score in response.get("SpotPlacementScores", []):
            scores[instance_type] = max(scores.get(instance_type, 0), int(score["Score"]))
    return scores


# Rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegionFacts:
    """Everything read for one region, before it becomes rows."""

    region: str
    zones: dict[str, tuple[str, ...]]
    specs: dict[str, MachineSpec]
    spot: dict[str, SpotQuote]
    on_demand: dict[str, float]
    quotas: dict[tuple[str, Pricing], float]
    running: dict[tuple[str, Pricing], int]
    warnings: list[str] = field(default_factory=list)


def used_vcpus(facts: RegionFacts) -> dict[tuple[str, Pricing], float]:
    used: dict[tuple[str, Pricing], float] = {}
    for (instance_type, pricing), count in facts.running.items():
        spec = facts.specs.get(instance_type)
        group = quota_group(instance_type)
        if spec and group:
            used[(group, pricing)] = used.get((group, pricing), 0.0) + count * spec.vcpus
    return used


def available_machines(facts: RegionFacts, spec: MachineSpec, pricing: Pricing) -> int:
    group = quota_group(spec.instance_type) or ""
    free_vcpus = facts.quotas.get((group, pricing), 0.0) - used_vcpus(facts).get(
        (group, pricing), 0.0
    )
    return max(0, int(free_vcpus // spec.vcpus)) if spec.vcpus > 0 else 0


def map_gpu(spec: MachineSpec, reference: CatalogReference) -> tuple[str | None, int, str]:
    """(catalog GPU type or None, GPUs per machine, how it was matched)."""
    known = reference.known_instance("aws", spec.instance_type)
    if known is not None:
        return known.gpu_type, known.gpu_count, "catalog instance_types"
    if spec.gpu_partition < 1.0:
        return None, max(1, spec.gpu_count), f"fractional GPU ({spec.gpu_partition:g} of one)"
    gpu = reference.gpu_by_name(spec.gpu_name or "", spec.gpu_memory_mib)
    how = f"GpuInfo {spec.gpu_name} {spec.gpu_memory_mib:.0f} MiB"
    return gpu, max(1, spec.gpu_count), how if gpu else f"{how}: unknown to the catalog"


def region_items(facts: RegionFacts, reference: CatalogReference) -> tuple[InventoryItem, ...]:
    """One on-demand row per offered GPU type, plus a spot row where a spot price exists."""
    rows: list[InventoryItem] = []
    for instance_type, zones in facts.zones.items():
        spec = facts.specs.get(instance_type)
        if spec is None or spec.gpu_count == 0:
            continue  # no GpuInfo: not a GPU machine
        gpu_type, gpu_count, how = map_gpu(spec, reference)
        offered = f"offered in {','.join(zones)}; {how}"
        prices: dict[Pricing, tuple[float | None, str]] = {
            Pricing.ON_DEMAND: (facts.on_demand.get(instance_type), "pricing.get_products")
        }
        quote = facts.spot.get(instance_type)
        if quote is not None:
            stamp = quote.timestamp.isoformat()
            prices[Pricing.SPOT] = (quote.price_usd_per_hr, f"spot {quote.zone} at {stamp}")
        for pricing, (price, price_source) in prices.items():
            rows.append(
                InventoryItem(
                    cloud="aws",
                    region=facts.region,
                    zone="",
                    instance_type=instance_type,
                    pricing=pricing,
                    gpu_type=gpu_type,
                    gpu_count=gpu_count,
                    price_usd_per_hr=price,
                    available_count=available_machines(facts, spec, pricing),
                    known_gpu=gpu_type is not None,
                    provenance=f"aws {facts.region}: {price_source}; quota minus running; {offered}",
                )
            )
    return tuple(rows)


# The source ---------------------------------------------------------------------------------


def _guarded(call: Callable[[], Any], what: str, default: Any, warnings: list[str]) -> Any:
    """Run `call`; on an AWS error record a plain warning and return `default`."""
    try:
        return call()
    except (ClientError, BotoCoreError) as error:
        warnings.append(f"{what}: {plain_error(error)}")
        return default


def read_region_facts(
    clients: ClientFactory, region: str, codes: dict[tuple[str, Pricing], str], now: datetime
) -> RegionFacts:
    """All AWS reads for one region. EC2 errors propagate; price/quota errors become warnings."""
    ec2 = clients("ec2", region)
    zones = gpu_family_offerings(ec2)
    if not zones:
        return RegionFacts(region, {}, {}, {}, {}, {}, {})
    running = running_counts(ec2)
    specs = instance_specs(ec2, sorted(set(zones) | {t for t, _ in running}))
    gpu_types = sorted(t for t in zones if t in specs and specs[t].gpu_count > 0)
    warnings: list[str] = []
    spot = latest_spot_prices(ec2, gpu_types, now)
    on_demand = _guarded(
        lambda: on_demand_prices(clients("pricing", PRICING_REGION), region, gpu_types),
        f"on-demand prices for {region}",
        {},
        warnings,
    )
    quotas = _guarded(
        lambda: quota_vcpus(clients("service-quotas", region), codes),
        f"vCPU quotas for {region} (available counts set to 0)",
        {},
        warnings,
    )
    return RegionFacts(region, zones, specs, spot, on_demand, quotas, running, warnings)


@dataclass(frozen=True, slots=True)
class AwsSource:
    """Reads GPU inventory from an AWS account (see the module docstring for the calls).

    `session` (a boto3 Session, e.g. with explicit keys) wins over `profile`; `client_factory`
    replaces client construction entirely (tests inject Stubber-backed clients through it).
    """

    regions: Sequence[str] = ("us-east-1",)
    profile: str | None = None
    endpoint_url: str | None = None
    session: boto3.Session | None = None
    client_factory: ClientFactory | None = None
    max_attempts: int = 5
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    with_spot_placement_scores: bool = False
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    name: SourceName = SourceName.AWS

    def clients(self, session: boto3.Session) -> ClientFactory:
        if self.client_factory is not None:
            return self.client_factory
        config = retry_config(self.max_attempts, self.connect_timeout_s, self.read_timeout_s)
        return session_clients(session, self.endpoint_url, config)

    def read(self, reference: CatalogReference) -> InventoryRead:
        """Read every region; raises InventoryReadError when none could be read."""
        session = self.session or boto3.Session(profile_name=self.profile)
        secrets = session_secrets(session)
        clients, codes = self.clients(session), read_quota_codes()
        items: list[InventoryItem] = []
        warnings: list[str] = []
        failures: list[str] = []
        empty: list[str] = []
        scores: dict[str, dict[str, int]] = {}
        for region in self.regions:
            try:
                facts = read_region_facts(clients, region, codes, self.now())
            except (ClientError, BotoCoreError) as error:
                failures.append(f"{region}: {plain_error(error, secrets)}")
                continue
            items.extend(region_items(facts, reference))
            warnings.extend(redact(w, secrets) for w in facts.warnings)
            if not facts.zones:
                empty.append(region)
            elif self.with_spot_placement_scores:
                scores[region] = _guarded(
                    partial(
                        spot_placement_scores, clients("ec2", region), region, sorted(facts.zones)
                    ),
                    f"spot placement scores for {region}",
                    {},
                    warnings,
                )
        return _finish(tuple(self.regions), items, warnings, failures, empty, scores)


def _finish(
    regions: tuple[str, ...],
    items: list[InventoryItem],
    warnings: list[str],
    failures: list[str],
    empty: list[str],
    scores: dict[str, dict[str, int]],
) -> InventoryRead:
    if failures and len(failures) == len(regions):
        raise InventoryReadError("; ".join(failures))
    for message in failures + warnings:
        log.warning("aws inventory: %s", message)
    params: dict[str, Any] = {"regions_without_gpu_offerings": empty}
    if scores:
        params["spot_placement_scores"] = scores
    return InventoryRead(
        source=SourceName.AWS,
        regions=regions,
        items=tuple(items),
        warnings=tuple(failures + warnings),
        params=params,
    )
