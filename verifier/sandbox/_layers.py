"""Which confinement layers were in force for a sandboxed run (a typed report)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from verifier.errors import SandboxError

__all__ = ["NO_LAYERS", "SandboxLayers", "SeccompMode"]

SeccompMode = Literal["notify", "kill", "none"]
"""notify: denied calls are reported to the parent, which kills the run; kill: the kernel
kills the process (SIGSYS, the call's name is not known); none: no filter."""


@dataclass(frozen=True)
class SandboxLayers:
    """What held the child in, as the child's own set-up found it (never assumed)."""

    user_namespace: bool = False
    """In a new user namespace whose uid inside is not 0: no capabilities anywhere."""
    no_capabilities: bool = False
    """The exec'd program holds no capabilities (userns, or not run as root)."""
    pid_namespace: bool = False
    """In a new PID namespace: sees no other process; every descendant dies with the run."""
    network_namespace: bool = False
    """In a new, empty network namespace."""
    private_proc: bool = False
    """/proc shows only the sandbox's own processes."""
    seccomp: SeccompMode = "none"
    landlock_abi: int = 0
    """Landlock ABI version enforced on the filesystem (0: none)."""
    dev_restricted: bool = False
    """/dev reduced to null, zero, urandom (plus the GPU nodes for a GPU run)."""
    process_limit: int = 0
    """RLIMIT_NPROC in force for the sandbox's uid (0: none)."""
    cgroup: bool = False
    """In a per-run cgroup (root only): every task's CPU accounted, the cpuset unwidenable,
    memory limited with shared memory and tmpfs counted, the task count bounded."""
    unaccountable_denied: bool = False
    """seccomp denies what /proc cannot account (CLONE_VM processes, affinity changes):
    the stand-in for the cgroup where there is none."""
    private_tmpfs_mib: int = 0
    """Size of the tmpfs over the private folder, MiB (0: the folder is on the host's disk)."""

    @property
    def filesystem_confined(self) -> bool:
        return self.landlock_abi >= 1

    def missing(self) -> list[str]:
        """Names of the layers that were not in force, in field order."""
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "unaccountable_denied" and self.cgroup:
                continue  # the cgroup accounts what this denial stands in for
            if value in (False, 0, "none"):
                out.append(f.name)
        return out

    def describe(self) -> str:
        """One line for the `sandbox` check row."""
        held = [f"seccomp={self.seccomp}", f"landlock_abi={self.landlock_abi}",
                f"process_limit={self.process_limit}"]
        if self.private_tmpfs_mib:
            held.append(f"private_tmpfs_mib={self.private_tmpfs_mib}")
        held += [f.name for f in fields(self)
                 if isinstance(getattr(self, f.name), bool) and getattr(self, f.name)]
        missing = self.missing()
        return ("layers: " + ", ".join(held)
                + ("; NOT in force: " + ", ".join(missing) if missing else "; all layers in force"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Any) -> SandboxLayers:
        if not isinstance(obj, dict) or set(obj) != {f.name for f in fields(cls)}:
            raise SandboxError("sandbox layers: expected an object with exactly the layer fields")
        kinds = {f.name: f.type for f in fields(cls)}
        for name, value in obj.items():
            want = kinds[name]
            if want == "bool" and not isinstance(value, bool):
                raise SandboxError(f"sandbox layers: {name} must be true or false")
            if want == "int" and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value < 2**31):
                raise SandboxError(f"sandbox layers: {name} must be a small non-negative integer")
        if obj["seccomp"] not in ("notify", "kill", "none"):
            raise SandboxError("sandbox layers: seccomp must be notify, kill or none")
        return cls(**obj)

    def weakest(self, other: SandboxLayers) -> SandboxLayers:
        """Per layer, the weaker of two runs' layers (what held for all of them)."""
        order = {"none": 0, "kill": 1, "notify": 2}
        seccomp = min(self.seccomp, other.seccomp, key=lambda m: order[m])
        limits = [p for p in (self.process_limit, other.process_limit) if p]
        return SandboxLayers(
            **{f.name: getattr(self, f.name) and getattr(other, f.name) for f in fields(self)
               if isinstance(getattr(self, f.name), bool)},
            seccomp=seccomp, landlock_abi=min(self.landlock_abi, other.landlock_abi),
            process_limit=max(limits) if len(limits) == 2 else 0,
            private_tmpfs_mib=max(self.private_tmpfs_mib, other.private_tmpfs_mib)
            if self.private_tmpfs_mib and other.private_tmpfs_mib else 0)


NO_LAYERS = SandboxLayers()
"""What a run reports when its child never told (it failed before its set-up finished)."""
