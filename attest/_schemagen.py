"""Regenerate attest/schemas/<kind>-v1.json from the rules in attest/predicates.py.

Run `python -m attest._schemagen` after changing a predicate; a test fails if the
published files drift from the code.
"""

from __future__ import annotations

import json
from pathlib import Path

from attest.predicates import SPECS, predicate_schema

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def render(kind: str) -> str:
    return json.dumps(predicate_schema(kind), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for kind in SPECS:
        path = SCHEMA_DIR / f"{kind}-v1.json"
        path.write_text(render(kind), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
