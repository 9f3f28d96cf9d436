"""The seccomp filter every jail runs under (bubblewrap's `--seccomp FD`): the kernel keyring is denied.

Linux has no keyring namespace, so jails of the same uid (65534) would share the user keyring and could pass
keys between submissions; bubblewrap's `--new-session` is a new terminal session, not a new session keyring.
The filter answers `add_key`, `request_key` and `keyctl` with EPERM, any x32 syscall with EPERM and any
syscall of another ABI (32-bit x86) with ENOSYS, so a student cannot reach the keyring by a different door.
Everything else is allowed.

The program is classic BPF (what seccomp(2) loads), written out here instead of depending on libseccomp's
Python binding, which pip cannot install: 10 instructions, each `struct sock_filter {u16 code; u8 jt, jf; u32 k}`.
"""
from __future__ import annotations

import errno
import platform
import struct

# <linux/audit.h>, and each ABI's numbers for add_key, request_key, keyctl (<asm/unistd*.h>)
_ARCHES = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
_X32_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH = 0, 4          # offsets in struct seccomp_data


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def keyring_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for this machine's ABI, or None where its syscall numbers are not known here."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, (add_key, request_key, keyctl) = arch
    deny, other_abi = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    return b"".join([
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, audit_arch, jt=1),           # our ABI: go on; else
        _insn(_RET_K, other_abi),
        _insn(_LD_W_ABS, _NR),
        _insn(_JGE_K, _X32_BIT, jt=3),             # x32 numbers (x86_64 only; none on aarch64): refuse
        _insn(_JEQ_K, add_key, jt=2),
        _insn(_JEQ_K, request_key, jt=1),
        _insn(_JEQ_K, keyctl, jf=1),
        _insn(_RET_K, deny),
        _insn(_RET_K, _ALLOW),
    ])
