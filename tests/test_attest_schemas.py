"""The published JSON Schemas accept every valid example and reject what the parser rejects.

No JSON Schema library is a dependency, so this file carries a small evaluator for
exactly the 2020-12 keywords the schemas use; it fails loudly on any other keyword.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_attest_predicates import BODIES, INVALID, Edit

from attest import examples as ex
from attest import predicates as p

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "attest" / "schemas"
KIND = {uri: kind for kind, uri in p.SHORT_NAMES.items()}
KNOWN = {"$schema", "$id", "title", "description", "type", "properties", "required",
         "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
         "minLength", "maxLength", "pattern", "enum", "anyOf", "minimum", "maximum",
         "propertyNames", "minProperties", "maxProperties"}


def _type_ok(value: Any, t: str) -> bool:
    return {
        "object": isinstance(value, dict), "array": isinstance(value, list),
        "string": isinstance(value, str), "boolean": isinstance(value, bool),
        "null": value is None,
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }[t]


def valid(schema: Any, value: Any) -> bool:
    if schema is False:
        return False
    unknown = set(schema) - KNOWN
    assert not unknown, f"schema uses keywords this test does not evaluate: {unknown}"
    if "type" in schema and not _type_ok(value, schema["type"]):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "anyOf" in schema and not any(valid(s, value) for s in schema["anyOf"]):
        return False
    if isinstance(value, str):
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 1 << 60):
            return False
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return False
        if "maximum" in schema and value > schema["maximum"]:
            return False
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 1 << 60):
            return False
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            rule = prefix[i] if i < len(prefix) else schema.get("items", True)
            if rule is not True and not valid(rule, item):
                return False
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
            return False
    if isinstance(value, dict):
        if not schema.get("minProperties", 0) <= len(value) <= schema.get("maxProperties", 1 << 60):
            return False
        if any(k not in value for k in schema.get("required", [])):
            return False
        props = schema.get("properties", {})
        for key, item in value.items():
            if "propertyNames" in schema and not valid({"type": "string", **schema["propertyNames"]}, key):
                return False
            if key in props:
                if not valid(props[key], item):
                    return False
            elif "additionalProperties" in schema:
                extra = schema["additionalProperties"]
                if extra is False or (extra is not True and not valid(extra, item)):
                    return False
    return True


def schema_for(ptype: str) -> Any:
    return json.loads((SCHEMA_DIR / f"{KIND[ptype]}-v1.json").read_text())


@pytest.mark.parametrize("ptype", list(BODIES))
def test_examples_are_schema_valid(ptype: str) -> None:
    assert valid(schema_for(ptype), BODIES[ptype]())


def test_real_shapes_of_examples() -> None:
    assert valid(schema_for(p.BENCHMARK_V1), ex.benchmark(1000))


# Beyond JSON Schema: cross-field rules (documented in each schema's description), the
# order inside an interval, NaN/Infinity (not JSON at all) and integers past 2**53.
CROSS_FIELD = ("must lie within", "is not one of workload.shapes", "duplicate path",
               "cannot be 'pass'", "cannot be 'confirmed'", "cannot be 'refuted'",
               "with low <= high", "claimed.speedup_ci95", "must be a finite number",
               "metrics.max_rel_err", "must contain the point estimate", "its own medians give")


@pytest.mark.parametrize(("ptype", "edit", "expected"),
                         [case for case in INVALID if not any(c in case[2] for c in CROSS_FIELD)])
def test_schema_rejects_what_the_parser_rejects(ptype: str, edit: Edit, expected: str) -> None:
    body = copy.deepcopy(BODIES[ptype]())
    edit(body)
    assert not valid(schema_for(ptype), body), expected
