"""The decision policy of `ktl reproduce`: options over the log's suggestion over the defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_server import Ktl, kernel_folder, running_log

from attest import examples
from attest.keys import generate_private_key, save_private_key
from client import InputError, ServerError
from client.models import LogInfo
from client.reproduce import resolve_policy
from ledger.server import ServerConfig

INFO = {"origin": "o", "verifier_key": "k", "tree_size": 0, "max_entry_bytes": 1,
        "max_blob_bytes": 1, "max_batch": 1, "checkpoint": None}


def test_options_override_the_log_which_overrides_the_defaults() -> None:
    policy, said = resolve_policy(None, None, None)
    assert (policy.tolerance, policy.confidence) == (0.05, 0.99)
    assert said == "tolerance 5 % (built-in default), confidence 99 % (built-in default)"
    policy, said = resolve_policy({"tolerance": 0.1, "confidence": 0.95}, None, 0.999)
    assert (policy.tolerance, policy.confidence) == (0.1, 0.999)
    assert said == "tolerance 10 % (the log's default), confidence 99.9 % (--confidence)"
    with pytest.raises(InputError, match="confidence"):
        resolve_policy(None, None, 1.0)


def test_log_info_reproduce_defaults_are_parsed_strictly() -> None:
    assert LogInfo.from_json(INFO).reproduce is None
    info = LogInfo.from_json({**INFO, "reproduce": {"tolerance": 0.1}})
    assert info.reproduce == {"tolerance": 0.1}
    assert LogInfo.from_json(info.to_json()) == info


@pytest.mark.parametrize("hostile", [
    {"tolerance": 5}, {"tolerance": -0.1}, {"confidence": 1.0}, {"confidence": 0.2},
    {"confidence": True}, {"tolerance": "0.1"}, {"margin": 0.3}, [0.1], "loose",
])
def test_a_hostile_log_cannot_hand_out_nonsense_defaults(hostile: Any) -> None:
    with pytest.raises(ServerError, match="reproduce"):
        LogInfo.from_json({**INFO, "reproduce": hostile})


def test_server_config_checks_its_reproduce_defaults() -> None:
    assert ServerConfig(reproduce_tolerance=0.1).reproduce_defaults() == {"tolerance": 0.1}
    assert ServerConfig().reproduce_defaults() == {}
    with pytest.raises(ValueError, match="reproduce_tolerance"):
        ServerConfig(reproduce_tolerance=2.0)
    with pytest.raises(ValueError, match="reproduce_confidence"):
        ServerConfig(reproduce_confidence=1.0)


@pytest.mark.slow
def test_the_policy_used_is_recorded_in_the_reproduction(tmp_path: Path) -> None:
    key = tmp_path / "vendor.key"
    save_private_key(key, generate_private_key())
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"verification": examples.verification()}))
    vendor, auditor = Ktl(tmp_path / "vendor"), Ktl(tmp_path / "auditor")
    with running_log(tmp_path / "log", reproduce_tolerance=0.2, reproduce_confidence=0.95) as url:
        vendor.json("publish", str(kernel_folder(tmp_path)), "--key", str(key), "--results",
                    str(results), "--log", url)
        assert auditor.json("log-info", "--log", url)["reproduce"] == {
            "tolerance": 0.2, "confidence": 0.95}
        got = auditor.json("reproduce", "--index", "0", "--log", url, "--confidence", "0.9")
    body = got["reproduction"]
    assert body["schema_version"] == 2
    assert body["policy"] == {"tolerance": 0.2, "confidence": 0.9, "test": "log-speedup-t"}
