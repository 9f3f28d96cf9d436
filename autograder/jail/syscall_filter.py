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
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def keyring_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for this machine's ABI, or None where its syscall numbers are not known here."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, (add_key, request_key, keyctl) = arch
    deny, other_abi = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    return b"".join(
        [
            _insn(_LD_W_ABS, _ARCH),
            _insn(_JEQ_K, audit_arch, jt=1),  # our ABI: go on; else
            _insn(_RET_K, other_abi),
            _insn(_LD_W_ABS, _NR),
            _insn(_JGE_K, _X32_BIT, jt=3),  # x32 numbers (x86_64 only; none on aarch64): refuse
            _insn(_JEQ_K, add_key, jt=2),
            _insn(_JEQ_K, request_key, jt=1),
            _insn(_JEQ_K, keyctl, jf=1),
            _insn(_RET_K, deny),
            _insn(_RET_K, _ALLOW),
        ]
    )


# --------------------------------------------------------------------------- the jail without namespaces

# Each ABI's numbers (<asm/unistd_64.h>, <asm-generic/unistd.h>) of what the namespace-less jail denies beyond
# the keyring: every new socket (the agent talks to the grader over its stdin/stdout pipes; socketpair, which
# reaches nothing, stays allowed), io_uring (it can open and connect sockets without socket(2)), reading or
# writing another process (ptrace, process_vm_*), namespaces and mounts (unshare, setns, clone's CLONE_NEW*
# flags), bpf, perf_event_open, userfaultfd and kexec.
_FALLBACK_DENIED = {
    "x86_64": {
        "socket": 41,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsmount": 432,
    },
    "aarch64": {
        "socket": 198,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsmount": 432,
    },
}
_KEYRING = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219},
}
# Namespace creation as Docker's default profile forbids it to a container without CAP_SYS_ADMIN.
_NAMESPACES = {"x86_64": {"unshare": 272, "setns": 308}, "aarch64": {"unshare": 97, "setns": 268}}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435  # both ABIs: its flags sit in a struct BPF cannot read, so ENOSYS (glibc falls
# back to clone, whose flags it can), as Docker's profile answers
# CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
# CLONE_NEWNET (<linux/sched.h>)
CLONE_NEW_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_JSET_K, _ARG0 = 0x45, 16  # BPF_JMP|BPF_JSET|BPF_K; the low 32 bits of args[0] (little endian)


def _program(machine: str, denied: dict[str, int], *, clone_flags: bool) -> bytes:
    """ABI check, then EPERM for each of `denied` (and, with clone_flags, clone with any CLONE_NEW* flag;
    clone3 ENOSYS). Classic BPF jumps only forward: the tests first, then the returns they jump to."""
    audit_arch = _ARCHES[machine][0]
    deny, nosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    head = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, audit_arch, jt=1), _insn(_RET_K, nosys), _insn(_LD_W_ABS, _NR)]
    tests: list[tuple[int, int, str]] = [(_JGE_K, _X32_BIT, "deny")]
    tests += [(_JEQ_K, n, "deny") for n in sorted(set(denied.values()))]
    if clone_flags:
        tests += [(_JEQ_K, _CLONE3, "nosys"), (_JEQ_K, _CLONE[machine], "clone")]
    where = {name: len(tests) + i for i, name in enumerate(("allow", "deny", "nosys", "clone"))}
    body = [_insn(code, k, jt=where[target] - i - 1) for i, (code, k, target) in enumerate(tests)]
    body += [_insn(_RET_K, _ALLOW), _insn(_RET_K, deny), _insn(_RET_K, nosys)]
    if clone_flags:  # clone: its flags (args[0]) hold a CLONE_NEW* bit -> EPERM, else allow
        body += [
            _insn(_LD_W_ABS, _ARG0),
            _insn(_JSET_K, CLONE_NEW_FLAGS, jf=1),
            _insn(_RET_K, deny),
            _insn(_RET_K, _ALLOW),
        ]
    return b"".join(head + body)


def fallback_filter(machine: str | None = None) -> bytes | None:
    """The namespace-less jail's program: the keyring and _FALLBACK_DENIED answer EPERM, clone with
    CLONE_NEW* flags too, clone3 ENOSYS; None where this ABI's numbers are not known here."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    return _program(machine, {**_KEYRING[machine], **_FALLBACK_DENIED[machine]}, clone_flags=True)


def no_namespaces_filter(machine: str | None = None) -> bytes | None:
    """What Docker's default seccomp profile does to namespaces (unshare, setns, clone with CLONE_NEW* flags:
    EPERM; clone3: ENOSYS), for a stand-in of Gradescope's and PrairieLearn's containers in tests."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    return _program(machine, _NAMESPACES[machine], clone_flags=True)


# Installs a program (hex, argv[1]) on this process and execs argv[2:]: run as `python -I -S -c LOADER HEX
# CMD...` (only the standard library; no file of ours needs to be readable where it runs). no_new_privs first:
# an unprivileged process may load a filter only with it, and nothing after it can gain privileges.
LOADER = r"""
import ctypes, os, struct, sys
prog = bytes.fromhex(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = struct.pack("HL", len(prog) // 8, ctypes.addressof(buf))
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) != 0:
    sys.stderr.write("course-jail: seccomp could not be installed: " + os.strerror(ctypes.get_errno()) + "\n")
    sys.exit(126)
os.execv(sys.argv[2], sys.argv[2:])
"""


def loader_argv(python: str, program: bytes, argv: list[str]) -> list[str]:
    """`argv` run under `program`, installed by LOADER in `python` (an interpreter the process can run)."""
    return [python, "-I", "-S", "-c", LOADER, program.hex(), *argv]
