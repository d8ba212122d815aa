"""Trust policy: which keys a reader trusts to sign which predicate types for which kernels.

The log accepts any entry whose signatures verify against the keys inside it; whether
a *reader* believes an entry is this policy's call. A policy is a small TOML file:

    # ktl trust policy
    version = 1

    [[rule]]
    name = "acme-performance"                   # unique; reported when the rule matches
    kernel = "acme/*"                           # glob on the kernel (subject) name
    predicate_types = ["benchmark", "verification"]   # short names, full URIs, or "*"
    keys = ["3d4c...(64 hex keyid)"]            # keyids (hex SHA-256 of the raw key)
    key_files = ["keys/acme-ci.pub"]            # PEM public keys, relative to this file
    threshold = 1                               # distinct trusted signers required

    [[rule]]
    name = "anyone-may-reproduce"
    kernel = "*"
    predicate_types = ["reproduction"]
    keys = ["*"]                                # any signer: see below
    threshold = 1

Rules: `version` must be 1; every rule needs `name`, `kernel`, `predicate_types`,
at least one key (from `keys` and/or `key_files`) and `threshold` (1 .. number of
distinct keys). `keys = ["*"]` (alone, threshold 1) allows any verified signer, and only
for `predicate_types = ["reproduction"]`: a reproduction is signed by whoever re-ran the
kernel, so its signer cannot be known in advance, and it releases nothing; kernels,
benchmarks and verifications always need named keys. The kernel glob uses shell wildcards (`*`, `?`, `[...]`) matched
case-sensitively against the whole name, and must match every subject of the
statement. An entry is allowed when any rule covers its kernel and predicate type
and at least `threshold` of the rule's keys are among the entry's verified signers;
the first such rule (in file order) is reported. Otherwise the result says why no
rule matched. Unknown fields anywhere are errors.

Reproducers. Whose reproductions count is the reader's call too: a reproduction by a key
the policy does not name is shown as "by an unknown key", never as evidence. Name the
reproducers you trust, and how many of them must agree, on distinct environments, before
a claim counts as independently confirmed or refuted:

    reproducer_quorum = 2                       # k of the named reproducers (default 1)

    [[reproducer]]
    name = "uni-lab"                            # shown beside its verdicts
    keys = ["9f1e...(64 hex keyid)"]
    key_files = ["keys/uni-lab.pub"]

`reproducer_quorum` needs at least that many `[[reproducer]]` tables; a key belongs to
one reproducer at most. Distinct environments: two reproductions count twice only when
their CPU model, core count, machine or GPU differ (`environment_identity`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest._errors import KeyFileError, PolicyError
from attest.entry import VerifiedEntry
from attest.keys import keyid, load_public_key
from attest.predicates import HEX64_PATTERN, PREDICATE_TYPES, SHORT_NAMES

MAX_POLICY_BYTES = 1 << 20
MAX_RULES = 256
MAX_KEYS_PER_RULE = 64
_KEYID = re.compile(HEX64_PATTERN)
_GLOB = re.compile(r"[a-z0-9._/*?\[\]!-]{1,128}")
_RULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,63}")
_RULE_FIELDS = ("name", "kernel", "predicate_types", "keys", "key_files", "threshold")
_REPRODUCER_FIELDS = ("name", "keys", "key_files")
_TOP_FIELDS = ("version", "rule", "reproducer", "reproducer_quorum")
MAX_REPRODUCERS = 64
ENVIRONMENT_IDENTITY_FIELDS = ("cpu_model", "cores", "machine", "gpu")
"""The environment fields that make two reproductions independent of each other."""


@dataclass(frozen=True)
class PolicyRule:
    """One rule: kernels matching `kernel` may carry `predicate_types` signed by `threshold` keys."""

    name: str
    kernel: str
    predicate_types: frozenset[str]
    keyids: frozenset[str]
    threshold: int
    #: `keys = ["*"]`: any verified signer (reproduction rules only)
    any_signer: bool = False

    def covers_kernel(self, names: Iterable[str]) -> bool:
        return all(fnmatch.fnmatchcase(name, self.kernel) for name in names)


@dataclass(frozen=True)
class PolicyResult:
    """The verdict of a policy on one entry: allowed, the rule that allowed it, and why."""

    allowed: bool
    rule: str | None
    reason: str


@dataclass(frozen=True)
class Reproducer:
    """A reproducer the reader trusts: its name and keys."""

    name: str
    keyids: frozenset[str]


@dataclass(frozen=True)
class Reproduction:
    """What a reader needs of one logged reproduction to weigh it: its signers, the
    environment it ran in, and its verdict."""

    index: int
    signer_keyids: tuple[str, ...]
    environment: tuple[str, ...]
    verdict: str


@dataclass(frozen=True)
class QuorumOutcome:
    """Whether a claim is independently settled under a policy's reproducer quorum.

    `status` is "confirmed" or "refuted" once `needed` named reproducers on distinct
    environments agree (refuted wins when both reach it), else "unsettled". The lists say
    who agreed, and which reproductions were by keys the policy does not name."""

    status: str
    needed: int
    confirming: tuple[str, ...]
    refuting: tuple[str, ...]
    unknown: tuple[int, ...]

    def describe(self) -> str:
        def who(names: tuple[str, ...]) -> str:
            return ", ".join(names) or "none"

        text = (f"{self.status}: confirmed by {who(self.confirming)}, refuted by "
                f"{who(self.refuting)} (quorum {self.needed} named reproducer(s) on distinct "
                "environments)")
        if self.unknown:
            text += f"; {len(self.unknown)} reproduction(s) by unknown keys not counted"
        return text


def _plain(obj: object) -> Any:
    """A policy's parts as JSON values: dataclasses as objects, sets sorted, tuples as lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, frozenset | set):
        return sorted(_plain(x) for x in obj)
    if isinstance(obj, tuple | list):
        return [_plain(x) for x in obj]
    return obj


def environment_identity(environment: object) -> tuple[str, ...]:
    """What makes two environments distinct for the quorum (`ENVIRONMENT_IDENTITY_FIELDS`)."""
    env = environment if isinstance(environment, dict) else {}
    return tuple(str(env.get(f)) for f in ENVIRONMENT_IDENTITY_FIELDS)


@dataclass(frozen=True)
class TrustPolicy:
    """An ordered list of rules (see the module docstring for the TOML format)."""

    rules: tuple[PolicyRule, ...]
    reproducers: tuple[Reproducer, ...] = ()
    reproducer_quorum: int = 1

    def digest(self) -> str:
        """sha256 of what the policy says (its rules, reproducers and quorum, key sets
        sorted), not of how its file is written: a monitor re-judges what it read when this
        changes (comments and spacing change nothing)."""
        return hashlib.sha256(json.dumps(_plain(self), sort_keys=True, separators=(",", ":"))
                              .encode()).hexdigest()

    def reproducer(self, keyids: Iterable[str]) -> Reproducer | None:
        """The named reproducer among these signers (the first in file order), if any."""
        signers = set(keyids)
        return next((r for r in self.reproducers if r.keyids & signers), None)

    def signers_for(self, name: str, predicate_types: Iterable[str]) -> frozenset[str] | None:
        """Every key a rule lets sign one of `predicate_types` about kernel `name` (alone
        or with others: a superset of the keys `evaluate` may allow); None when a rule lets
        any signer."""
        types = set(predicate_types)
        keys: set[str] = set()
        for rule in self.rules:
            if rule.covers_kernel([name]) and rule.predicate_types & types:
                if rule.any_signer:
                    return None
                keys |= rule.keyids
        return frozenset(keys)

    def signer_phrase(self, keyids: Iterable[str]) -> str:
        """`by reproducer 'uni-lab' (key 9f1e…)` or `by an unknown key 1a2b…`."""
        keys = sorted(keyids)
        named = self.reproducer(keys)
        if named is not None:
            key = next(k for k in keys if k in named.keyids)
            return f"by reproducer {named.name!r} (key {key[:16]}…)"
        return unknown_signer_phrase(keys)

    def quorum(self, reproductions: Iterable[Reproduction]) -> QuorumOutcome:
        """Whether `reproductions` of one claim reach the reproducer quorum either way.

        Each named reproducer counts once per verdict, and only on an environment no other
        counted reproducer of that verdict used; unknown keys never count."""
        seen: dict[str, dict[str, set[tuple[str, ...]]]] = {"confirmed": {}, "refuted": {}}
        unknown: list[int] = []
        for rep in reproductions:
            who = self.reproducer(rep.signer_keyids)
            if who is None:
                unknown.append(rep.index)
                continue
            if rep.verdict in seen:
                seen[rep.verdict].setdefault(who.name, set()).add(rep.environment)
        agreed = {v: _distinct(by) for v, by in seen.items()}
        k = self.reproducer_quorum
        status = ("refuted" if len(agreed["refuted"]) >= k and self.reproducers else
                  "confirmed" if len(agreed["confirmed"]) >= k and self.reproducers else
                  "unsettled")
        return QuorumOutcome(status, k, tuple(agreed["confirmed"]), tuple(agreed["refuted"]),
                             tuple(unknown))

    @classmethod
    def from_toml(cls, text: str, base_dir: str | os.PathLike[str] | None = None) -> TrustPolicy:
        """Parse and validate a policy; `key_files` are read relative to `base_dir` (default cwd)."""
        if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
            raise PolicyError(f"policy is larger than {MAX_POLICY_BYTES} bytes")
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"policy is not valid TOML: {exc}") from None
        base = Path(base_dir) if base_dir is not None else Path(".")
        reproducers, quorum = _parse_reproducers(doc, base)
        return cls(rules=_parse_policy(doc, base), reproducers=reproducers,
                   reproducer_quorum=quorum)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrustPolicy:
        """Read a policy file; its `key_files` are relative to the file's folder."""
        path = Path(path)
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_POLICY_BYTES + 1)
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {path}: {exc.strerror}") from None
        if len(data) > MAX_POLICY_BYTES:
            raise PolicyError(f"policy file {path} is larger than {MAX_POLICY_BYTES} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise PolicyError(f"policy file {path} is not UTF-8") from None
        try:
            return cls.from_toml(text, base_dir=path.parent)
        except PolicyError as exc:
            raise PolicyError(f"{path}: {exc}") from None

    def evaluate(self, verified_entry: VerifiedEntry) -> PolicyResult:
        """Decide whether the entry's verified signers are trusted for its kernel and type."""
        statement = verified_entry.statement
        names = [s.name for s in statement.subjects]
        ptype = statement.predicate_type
        signers = frozenset(verified_entry.signer_keyids)
        kernel_rules = [r for r in self.rules if r.covers_kernel(names)]
        shown = ", ".join(repr(n) for n in names)
        if not kernel_rules:
            return PolicyResult(False, None, f"no rule covers kernel {shown}")
        type_rules = [r for r in kernel_rules if ptype in r.predicate_types]
        if not type_rules:
            listed = ", ".join(repr(r.name) for r in kernel_rules)
            return PolicyResult(False, None, f"rule(s) {listed} cover kernel {shown} but none "
                                             f"allows predicate type {ptype}")
        shortfalls = []
        for rule in type_rules:
            if rule.any_signer and signers:
                who = ", ".join(k[:16] for k in sorted(signers))
                return PolicyResult(True, rule.name, f"rule {rule.name!r}: any signer may log "
                                    f"a reproduction ({who})")
            trusted = sorted(signers & rule.keyids)
            if len(trusted) >= rule.threshold:
                who = ", ".join(k[:16] for k in trusted)
                return PolicyResult(True, rule.name, f"rule {rule.name!r}: {len(trusted)} of "
                                    f"{rule.threshold} required trusted signature(s) ({who})")
            shortfalls.append(f"rule {rule.name!r} needs {rule.threshold} trusted signature(s), "
                              f"found {len(trusted)}")
        signed_by = ", ".join(k[:16] for k in sorted(signers)) or "nobody"
        return PolicyResult(False, None, "; ".join(shortfalls) + f" (signed by {signed_by})")


def _parse_policy(doc: dict[str, Any], base: Path) -> tuple[PolicyRule, ...]:
    for key in doc:
        if key not in _TOP_FIELDS:
            raise PolicyError(f"{key}: unknown field (allowed: {', '.join(_TOP_FIELDS)})")
    if "version" not in doc:
        raise PolicyError("version: required field is missing (write `version = 1`)")
    if doc["version"] != 1 or isinstance(doc["version"], bool):
        raise PolicyError(f"version: must be 1, got {doc['version']!r}")
    rules = doc.get("rule")
    if not isinstance(rules, list) or not rules:
        raise PolicyError("rule: at least one [[rule]] table is required")
    if len(rules) > MAX_RULES:
        raise PolicyError(f"rule: at most {MAX_RULES} rules, got {len(rules)}")
    parsed = tuple(_parse_rule(r, f"rule[{i}]", base) for i, r in enumerate(rules))
    seen: set[str] = set()
    for i, rule in enumerate(parsed):
        if rule.name in seen:
            raise PolicyError(f"rule[{i}].name: duplicate rule name {rule.name!r}")
        seen.add(rule.name)
    return parsed


def load_reproducer_panel(path: str | os.PathLike[str]) -> TrustPolicy:
    """The `[[reproducer]]` tables and `reproducer_quorum` of a TOML file: a log operator's
    reproducers to name on its explorer, and how many of them on distinct environments
    settle a claim there (the same rule as a reader's policy; no signing rules)."""
    path = Path(path)
    try:
        data = path.read_bytes()[:MAX_POLICY_BYTES + 1]
    except OSError as exc:
        raise PolicyError(f"cannot read reproducers file {path}: {exc.strerror}") from None
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"reproducers file {path} is larger than {MAX_POLICY_BYTES} bytes")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"reproducers file {path} is not UTF-8 TOML: {exc}") from None
    extra = set(doc) - {"reproducer", "reproducer_quorum"}
    if extra:
        raise PolicyError(f"{path}: unknown field(s) {sorted(extra)} (allowed: reproducer, "
                          "reproducer_quorum)")
    try:
        found, quorum = _parse_reproducers(doc, path.parent)
    except PolicyError as exc:
        raise PolicyError(f"{path}: {exc}") from None
    return TrustPolicy(rules=(), reproducers=found, reproducer_quorum=quorum)


def load_reproducers(path: str | os.PathLike[str]) -> dict[str, str]:
    """keyid -> name of the `[[reproducer]]` tables of a TOML file (see
    `load_reproducer_panel`; `key_files` are relative to the file)."""
    return reproducer_names(load_reproducer_panel(path))


def reproducer_names(policy: TrustPolicy) -> dict[str, str]:
    """keyid -> name of a policy's reproducers."""
    return {k: r.name for r in policy.reproducers for k in r.keyids}


def reproducer_panel(names: Mapping[str, str], quorum: int = 1) -> TrustPolicy:
    """A policy of reproducers only from keyid -> name (the inverse of `reproducer_names`)."""
    keys: dict[str, set[str]] = {}
    for k, name in names.items():
        keys.setdefault(name, set()).add(k)
    found = tuple(Reproducer(n, frozenset(ks)) for n, ks in sorted(keys.items()))
    return TrustPolicy(rules=(), reproducers=found,
                       reproducer_quorum=max(1, min(quorum, len(found) or 1)))


def unknown_signer_phrase(keyids: Iterable[str]) -> str:
    """`by an unknown key 1a2b…` (the phrase wherever no reader vouches for a signer)."""
    keys = sorted(keyids)
    if not keys:
        return "by no verified key"
    return ("by an unknown key " if len(keys) == 1 else "by unknown keys ") + ", ".join(
        f"{k[:16]}…" for k in keys)


def _distinct(by_name: dict[str, set[tuple[str, ...]]]) -> list[str]:
    """Names that can each be matched to an environment no other counted name uses
    (greedy, fewest environments first: enough for the small counts a quorum needs)."""
    used: set[tuple[str, ...]] = set()
    out: list[str] = []
    for name, envs in sorted(by_name.items(), key=lambda kv: (len(kv[1]), kv[0])):
        free = sorted(envs - used)
        if free:
            used.add(free[0])
            out.append(name)
    return out


def _keyids(entry: dict[str, Any], path: str, base: Path) -> set[str]:
    keyids: set[str] = set()
    for i, kid in enumerate(_string_list(entry.get("keys", []), f"{path}.keys")):
        if not _KEYID.fullmatch(kid):
            raise PolicyError(f"{path}.keys[{i}]: must be a keyid (64 lowercase hex characters); "
                              "put public key files in key_files")
        keyids.add(kid)
    for i, file in enumerate(_string_list(entry.get("key_files", []), f"{path}.key_files")):
        try:
            keyids.add(keyid(load_public_key(base / file)))
        except KeyFileError as exc:
            raise PolicyError(f"{path}.key_files[{i}]: {exc}") from None
    return keyids


def _parse_reproducers(doc: dict[str, Any], base: Path) -> tuple[tuple[Reproducer, ...], int]:
    tables = doc.get("reproducer", [])
    if not isinstance(tables, list) or len(tables) > MAX_REPRODUCERS:
        raise PolicyError(f"reproducer: must be [[reproducer]] tables, at most {MAX_REPRODUCERS}")
    out: list[Reproducer] = []
    owner: dict[str, str] = {}
    for i, table in enumerate(tables):
        path = f"reproducer[{i}]"
        if not isinstance(table, dict):
            raise PolicyError(f"{path}: must be a table")
        for key in table:
            if key not in _REPRODUCER_FIELDS:
                raise PolicyError(f"{path}.{key}: unknown field (allowed: "
                                  f"{', '.join(_REPRODUCER_FIELDS)})")
        name = table.get("name")
        if not isinstance(name, str) or not _RULE_NAME.fullmatch(name):
            raise PolicyError(f"{path}.name: must be 1-64 letters, digits, spaces, '.', '_' or '-'")
        if any(r.name == name for r in out):
            raise PolicyError(f"{path}.name: duplicate reproducer name {name!r}")
        keys = _keyids(table, path, base)
        if not keys:
            raise PolicyError(f"{path}: list at least one key in keys or key_files")
        for k in keys:
            if k in owner:
                raise PolicyError(f"{path}: key {k[:16]}… already belongs to reproducer "
                                  f"{owner[k]!r}; a key names one reproducer")
            owner[k] = name
        out.append(Reproducer(name, frozenset(keys)))
    quorum = doc.get("reproducer_quorum", 1)
    if "reproducer_quorum" in doc and not out:
        raise PolicyError("reproducer_quorum: needs at least one [[reproducer]] table")
    if isinstance(quorum, bool) or not isinstance(quorum, int) or not (
            1 <= quorum <= max(1, len(out))):
        raise PolicyError(f"reproducer_quorum: must be an integer from 1 to the number of "
                          f"reproducers ({len(out)}), got {quorum!r}")
    return tuple(out), quorum


def _string_list(value: object, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{path}: must be a list of strings")
    if len(value) > MAX_KEYS_PER_RULE:
        raise PolicyError(f"{path}: at most {MAX_KEYS_PER_RULE} items")
    return list(value)


def _predicate_types(value: object, path: str) -> set[str]:
    """A rule's `predicate_types`: short names, full type URIs or `*` (all), at least one."""
    types: set[str] = set()
    type_list = _string_list(value, path)
    if not type_list:
        raise PolicyError(f"{path}: list at least one predicate type")
    for i, ptype in enumerate(type_list):
        if ptype == "*":
            types.update(PREDICATE_TYPES)
        elif ptype in SHORT_NAMES:
            types.add(SHORT_NAMES[ptype])
        elif ptype in PREDICATE_TYPES:
            types.add(ptype)
        else:
            known = ", ".join([*SHORT_NAMES, "*"])
            raise PolicyError(f"{path}[{i}]: unknown predicate type {ptype!r} "
                              f"(use one of {known} or a full type URI)")
    return types


def _parse_rule(rule: object, path: str, base: Path) -> PolicyRule:
    if not isinstance(rule, dict):
        raise PolicyError(f"{path}: must be a table")
    for key in rule:
        if key not in _RULE_FIELDS:
            raise PolicyError(f"{path}.{key}: unknown field (allowed: {', '.join(_RULE_FIELDS)})")
    for key in ("name", "kernel", "predicate_types", "threshold"):
        if key not in rule:
            raise PolicyError(f"{path}.{key}: required field is missing")
    name = rule["name"]
    if not isinstance(name, str) or not _RULE_NAME.fullmatch(name):
        raise PolicyError(f"{path}.name: must be 1-64 letters, digits, spaces, '.', '_' or '-'")
    kernel = rule["kernel"]
    if not isinstance(kernel, str) or not _GLOB.fullmatch(kernel):
        raise PolicyError(f"{path}.kernel: must be a kernel-name glob such as 'acme/*' "
                          "(lowercase letters, digits, . _ - / and wildcards * ? [ ] !)")
    types = _predicate_types(rule["predicate_types"], f"{path}.predicate_types")
    key_list = _string_list(rule.get("keys", []), f"{path}.keys")
    if "*" in key_list:
        return _any_signer_rule(rule, path, name, kernel, frozenset(types), key_list)
    keyids = _keyids(rule, path, base)
    if not keyids:
        raise PolicyError(f"{path}: list at least one trusted key in keys or key_files")
    threshold = rule["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(keyids):
        raise PolicyError(f"{path}.threshold: must be an integer from 1 to the number of distinct "
                          f"keys ({len(keyids)}), got {threshold!r}")
    return PolicyRule(name=name, kernel=kernel, predicate_types=frozenset(types),
                      keyids=frozenset(keyids), threshold=threshold)


def _any_signer_rule(rule: dict[str, Any], path: str, name: str, kernel: str,
                     types: frozenset[str], key_list: list[str]) -> PolicyRule:
    """A `keys = ["*"]` rule: alone, threshold 1, reproductions only (see the module doc)."""
    if key_list != ["*"] or rule.get("key_files"):
        raise PolicyError(f"{path}.keys: '*' (any signer) stands alone: no other keys or "
                          "key_files in the same rule")
    if types != {SHORT_NAMES["reproduction"]}:
        raise PolicyError(f"{path}.keys: '*' (any signer) is only for predicate_types = "
                          "[\"reproduction\"]: kernels, benchmarks and verifications need named "
                          "keys")
    if rule["threshold"] != 1 or isinstance(rule["threshold"], bool):
        raise PolicyError(f"{path}.threshold: must be 1 with keys = ['*'], got "
                          f"{rule['threshold']!r}")
    return PolicyRule(name=name, kernel=kernel, predicate_types=types, keyids=frozenset(),
                      threshold=1, any_signer=True)
