"""attest: claim formats (keys, DSSE envelopes, in-toto statements, predicates, trust policy).

Pure code: no web framework, database or HTTP client is imported here.
"""

from __future__ import annotations

from attest._errors import (
    AttestError,
    EntryError,
    EntryTooLargeError,
    EnvelopeError,
    KeyFileError,
    PolicyError,
    SignatureError,
    ValidationError,
)
from attest.dsse import Envelope, Signature, pae, sign_envelope, verify_envelope
from attest.entry import (
    MAX_ENTRY_BYTES,
    LogEntry,
    VerifiedEntry,
    decode_entry,
    encode_entry,
    make_entry,
    verify_entry,
)
from attest.keys import (
    generate_private_key,
    keyid,
    load_private_key,
    load_public_key,
    public_key_b64,
    public_key_from_b64,
    save_private_key,
    save_public_key,
)
from attest.policy import PolicyResult, PolicyRule, TrustPolicy
from attest.predicates import (
    BENCHMARK_V1,
    KERNEL_V1,
    PREDICATE_NAMESPACE,
    PREDICATE_TYPES,
    REPRODUCTION_V1,
    VERIFICATION_V1,
    BenchmarkPredicate,
    KernelPredicate,
    Predicate,
    ReproductionPredicate,
    VerificationPredicate,
    parse_predicate,
)
from attest.statement import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    Statement,
    Subject,
    make_statement,
    parse_statement_payload,
    statement_payload,
)

__all__ = [
    "BENCHMARK_V1",
    "KERNEL_V1",
    "MAX_ENTRY_BYTES",
    "PAYLOAD_TYPE",
    "PREDICATE_NAMESPACE",
    "PREDICATE_TYPES",
    "REPRODUCTION_V1",
    "STATEMENT_TYPE",
    "VERIFICATION_V1",
    "AttestError",
    "BenchmarkPredicate",
    "EntryError",
    "EntryTooLargeError",
    "Envelope",
    "EnvelopeError",
    "KernelPredicate",
    "KeyFileError",
    "LogEntry",
    "PolicyError",
    "PolicyResult",
    "PolicyRule",
    "Predicate",
    "ReproductionPredicate",
    "Signature",
    "SignatureError",
    "Statement",
    "Subject",
    "TrustPolicy",
    "ValidationError",
    "VerificationPredicate",
    "VerifiedEntry",
    "decode_entry",
    "encode_entry",
    "generate_private_key",
    "keyid",
    "load_private_key",
    "load_public_key",
    "make_entry",
    "make_statement",
    "pae",
    "parse_predicate",
    "parse_statement_payload",
    "public_key_b64",
    "public_key_from_b64",
    "save_private_key",
    "save_public_key",
    "sign_envelope",
    "statement_payload",
    "verify_entry",
    "verify_envelope",
]
