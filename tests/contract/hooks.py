"""schemathesis hooks for the API contract test (tests/test_api_contract.py).

One hook: a "schema-violating request accepted" failure (ST201) is dropped when the request
*as it went on the wire* is one the document accepts. schemathesis generates an object
query parameter (`GET /api/v1/search`'s `by`) and then serializes it; an extra property
whose value is null, [] or {} has no wire form and vanishes, so a case generated as invalid
("violates additionalProperties") can reach the server as a valid request, which the server
rightly answers 200. schemathesis cannot re-validate serialized objects (its own exemptions
say so) and reports the generated violation. Here the sent query is checked against the
document itself, so the failure is kept unless the bytes sent were valid: a server that
accepts a request the document refuses still fails the run (tests/test_api_contract.py:
the attacker's requests for this filter).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jsonschema_rs
import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.parameters import ParameterLocation

DOC: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "ledger" / "openapi.json").read_text())
_INTEGER = re.compile(r"-?[0-9]{1,20}")
_ELSEWHERE = (ParameterLocation.PATH, ParameterLocation.HEADER, ParameterLocation.COOKIE,
              ParameterLocation.BODY)


def _object_properties(schema: Mapping[str, Any]) -> set[str] | None:
    """The property names a form-exploded object parameter spreads over the query, or None
    for a scalar parameter."""
    branches = [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]
    objects = [b for b in branches if b.get("type") == "object" or "properties" in b]
    if not objects:
        return None
    return {name for b in objects for name in b.get("properties", {})}


def _scalar(value: str, schema: Mapping[str, Any]) -> object | None:
    """The typed value of one scalar query parameter, or None when its text cannot be one."""
    if schema.get("type") == "integer":
        return int(value) if _INTEGER.fullmatch(value) else None
    return value


def sent_query_is_valid(operation: Mapping[str, Any], query: str) -> bool:
    """Whether the raw query string `query` is one the document's `operation` accepts:
    every key claimed by exactly one parameter, none repeated, each required one present,
    each value valid against its parameter's schema. Anything undecidable is "not valid"."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query),
                          errors="strict")
    except (ValueError, UnicodeDecodeError):
        return False
    sent = dict(pairs)
    if len(sent) != len(pairs):
        return False  # a repeated key: the document describes each key once
    claimed: set[str] = set()
    for prm in operation.get("parameters", []):
        if prm["in"] != "query":
            continue
        props = _object_properties(prm["schema"])
        if props is not None and prm.get("style", "form") == "form" and prm.get("explode", True):
            value: object = {k: sent[k] for k in props if k in sent}
            claimed |= props & sent.keys()
            present = bool(value)
        elif prm["name"] in sent:
            value = _scalar(sent[prm["name"]], prm["schema"])
            if value is None:
                return False
            claimed.add(prm["name"])
            present = True
        else:
            present = False
        if not present:
            if prm.get("required"):
                return False
            continue
        if not jsonschema_rs.validator_for(prm["schema"]).is_valid(value):
            return False
    return claimed == sent.keys()


def _operation(method: str, path: str) -> Mapping[str, Any] | None:
    op: Mapping[str, Any] | None = DOC["paths"].get(path, {}).get(method.lower())
    return op


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but an ST201 whose request, as sent, the document accepts."""
    if not isinstance(failure, AcceptedNegativeData):
        return True
    meta = case.meta
    if meta is None or any(meta.is_negative_at(loc) for loc in _ELSEWHERE):
        return True  # negated elsewhere too: the query alone cannot clear it
    op = _operation(case.operation.method, case.operation.path)
    if op is None or "requestBody" in op:
        return True
    return not sent_query_is_valid(op, urlsplit(response.request.url).query)
