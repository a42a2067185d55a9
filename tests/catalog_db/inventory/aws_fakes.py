"""Responses in AWS's documented formats, for the APIs moto does not serve (Price List,
Service Quotas) and for injected failures (throttling, access denied) on the real HTTP path."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from catalog_db.inventory.aws_source import read_quota_codes


def price_document(instance_type: str, region: str, usd_per_hr: float, **attributes: str) -> str:
    """One Price List API PriceList entry (FormatVersion aws_v1) for an on-demand price."""
    sku = hashlib.sha256(f"{instance_type}{region}{attributes}".encode()).hexdigest()[:16].upper()
    attrs = {
        "instanceType": instance_type,
        "regionCode": region,
        "location": "test location",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "instanceFamily": "GPU instance",
    } | attributes
    term = f"{sku}.JRTCKXETXF"
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    term: {
                        "priceDimensions": {
                            f"{term}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd_per_hr} per On Demand Linux hour",
                                "appliesTo": [],
                                "rateCode": f"{term}.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": f"{usd_per_hr:.10f}"},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2025-11-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                }
            },
            "version": "20251101000000",
            "publicationDate": "2025-11-01T00:00:00Z",
        }
    )


def answer_pricing(client: Any, price_of: Callable[[str, str], float | None]) -> list[dict]:
    """Make `client` (pricing) answer GetProducts from `price_of(type, region)` without any
    network call, in the documented format; returns the list of requests seen."""
    seen: list[dict] = []

    def respond(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = json.loads(params["body"])
        seen.append(body)
        filters = {f["Field"]: f["Value"] for f in body["Filters"]}
        region = filters["regionCode"]
        documents = [
            price_document(t, region, price)
            for t in filters["instanceType"].split(",")
            if (price := price_of(t, region)) is not None
        ]
        return AWSResponse("", 200, {}, None), {"FormatVersion": "aws_v1", "PriceList": documents}

    client.meta.events.register("before-call.pricing.GetProducts", respond)
    return seen


def stub_quotas(client: Any, vcpus: dict[tuple[str, str], float]) -> Stubber:
    """A Stubber answering the four GetServiceQuota calls of one region, in the source's order."""
    stubber = Stubber(client)
    for (group, pricing), code in sorted(read_quota_codes().items()):
        quota = {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:us-east-1:123456789012:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": f"{group} {pricing}",
            "Value": vcpus[(group, pricing.value)],
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
        stubber.add_response(
            "get_service_quota", {"Quota": quota}, {"ServiceCode": "ec2", "QuotaCode": code}
        )
    stubber.activate()
    return stubber


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def ec2_error_response(status: int, code: str, message: str) -> AWSResponse:
    """An EC2 (query protocol) error response as AWS sends it."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>8d3f1c52-0000-4000-8000-000000000000</RequestID></Response>"
    ).encode()
    return AWSResponse("", status, {"Content-Type": "text/xml"}, _Raw(body))  # type: ignore[arg-type]


def fail_ec2(
    client: Any, operation: str, status: int, code: str, times: int, message: str = "injected"
) -> list[int]:
    """Answer the first `times` sends of `operation` with an error instead of calling moto
    (inside botocore's retry loop, so retries are real); later sends reach moto."""
    calls: list[int] = []

    def before_send(request: Any, **_: Any) -> AWSResponse | None:
        calls.append(1)
        if len(calls) <= times:
            return ec2_error_response(status, code, message)
        return None

    client.meta.events.register(f"before-send.ec2.{operation}", before_send)
    return calls
