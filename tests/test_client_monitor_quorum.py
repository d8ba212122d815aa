"""`ktl monitor --policy` weighs reproductions by the reproducer quorum (`TrustPolicy.quorum`,
as `ktl get` and the explorer do): a refutation finding only once enough named reproducers
on distinct environments refute; strangers' verdicts are never counted nor kept."""

from __future__ import annotations

import json
from typing import Any

from test_pages_helpers import signed

from attest import REPRODUCTION_V1, generate_private_key, keyid
from attest import examples as ex
from attest.entry import decode_entry, verify_entry
from attest.policy import reproducer_panel
from client.monitor import Ledger, MonitorState, _ledger, _reproduction_findings, _weighed

LAB_A, LAB_B, STRANGER = (generate_private_key() for _ in range(3))
NAMES = {keyid(LAB_A.public_key()): "lab-a", keyid(LAB_B.public_key()): "lab-b"}


def _verified(key: Any, cpu: str = "AMD EPYC 7B13") -> Any:
    body = ex.reproduction_v2()  # refutes claim entry 2, confirms (legacy row) target 3
    body["environment"]["cpu_model"] = cpu
    data = signed(ex.KERNEL_NAME, ex.SOURCE_SHA256, REPRODUCTION_V1, body, key)
    return verify_entry(decode_entry(data))


def _kinds(findings: list[Any]) -> list[str]:
    return [f.kind for f in findings]


def test_a_refutation_is_a_finding_only_once_the_quorum_refutes() -> None:
    policy = reproducer_panel(NAMES, 2)
    ledger: Ledger = {}
    first = _reproduction_findings(10, _verified(LAB_A), "acme/k", policy, ledger)
    assert _kinds(first) == ["reproduction"]
    assert "entry 2: unsettled: confirmed by none, refuted by lab-a (quorum 2" in first[0].detail
    # a stranger's refutation, however many: not counted, not kept
    for i in range(20):
        got = _reproduction_findings(11 + i, _verified(generate_private_key()), "acme/k",
                                     policy, ledger)
        assert _kinds(got) == ["reproduction"] and "quorum" not in got[0].detail
    assert sum(len(v) for v in ledger.values()) == 2  # lab-a's two verdicts (entries 2, 3)
    # lab-b on the same machine as lab-a: not independent
    same = _reproduction_findings(40, _verified(LAB_B), "acme/k", policy, ledger)
    assert _kinds(same) == ["reproduction"]
    # lab-b elsewhere: the quorum refutes claim entry 2 — one finding, naming who
    other = _reproduction_findings(41, _verified(LAB_B, "Intel Xeon"), "acme/k", policy, ledger)
    assert _kinds(other) == ["reproduction", "refutation"]
    assert "entry 2 refuted by reproducer 'lab-b'" in other[1].detail
    assert "refuted by lab-a, lab-b" in other[1].detail or "refuted by lab-b, lab-a" in \
        other[1].detail
    again = _reproduction_findings(42, _verified(LAB_A, "ARM"), "acme/k", policy, ledger)
    assert _kinds(again) == ["reproduction"]  # already refuted: not a new finding


def test_one_named_refutation_is_a_finding_at_quorum_one() -> None:
    got = _reproduction_findings(5, _verified(LAB_A), "acme/k", reproducer_panel(NAMES), {})
    assert _kinds(got) == ["reproduction", "refutation"]


def test_named_verdicts_persist_in_the_monitor_state_across_runs() -> None:
    policy = reproducer_panel(NAMES, 2)
    ledger: Ledger = {}
    _reproduction_findings(10, _verified(LAB_A), "acme/k", policy, ledger)
    state = MonitorState("o", 11, None, (), _weighed(ledger))
    back = MonitorState.from_json(json.loads(json.dumps(state.to_json())))
    assert back == state
    later = _reproduction_findings(12, _verified(LAB_B, "Intel Xeon"), "acme/k", policy,
                                   _ledger(back.weighed))
    assert _kinds(later) == ["reproduction", "refutation"]
    # a state file from before verdicts were kept still loads
    old = state.to_json()
    del old["weighed"]
    assert MonitorState.from_json(old).weighed == ()
