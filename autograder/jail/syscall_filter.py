"""The seccomp filters the jails run under (bubblewrap's `--seccomp FD`; the jail without namespaces' loader).

Every jail is denied:
- the kernel keyring (add_key, request_key, keyctl): Linux has no keyring namespace, so jails of the same uid
  (65534) would share the user keyring and could pass keys between submissions; bubblewrap's `--new-session` is
  a new terminal session, not a new session keyring;
- memory no process maps, which no watch of resident memory can count and, without namespaces, which outlives
  the jail (issue 42): memfd_create (3 GB written into memfds nobody maps), System V IPC (a segment after
  shmdt, semaphores, message queues) and POSIX message queues (mq_open). Nothing of the agent, IPython, numpy or jax's CPU backend in the jail asks
  for either (the solutions and the honest corpus grade the same under the filter; libtpu, which does call
  memfd_create, runs only in the judge), and the memory cgroup would have counted them: denied in every row, a
  notebook that asks gets the same verdict in every configuration;
- any x32 syscall (EPERM) and any syscall of another ABI (32-bit x86: ENOSYS), so none of it is reached by a
  different door.
Everything else is allowed in bubblewrap's jail; the jail without namespaces denies more (fallback_filter).

The program is classic BPF (what seccomp(2) loads), written out here instead of depending on libseccomp's
Python binding, which pip cannot install: each instruction `struct sock_filter {u16 code; u8 jt, jf; u32 k}`.
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


def bwrap_filter(machine: str | None = None) -> bytes | None:
    """Bubblewrap's jail's program: the keyring and what no watch can count (_UNCOUNTED) answer EPERM; None where
    this ABI's numbers are not known here."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    return _program(machine, {**_KEYRING[machine], **_UNCOUNTED[machine]}, clone_flags=False)


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
# Memory no process maps (see the module docstring): memfd_create and every System V IPC call.
_UNCOUNTED = {
    "x86_64": {
        "memfd_create": 319,
        "shmget": 29,
        "shmat": 30,
        "shmctl": 31,
        "semget": 64,
        "semop": 65,
        "semctl": 66,
        "shmdt": 67,
        "msgget": 68,
        "msgsnd": 69,
        "msgrcv": 70,
        "msgctl": 71,
        "semtimedop": 220,
        "mq_open": 240,
    },
    "aarch64": {
        "memfd_create": 279,
        "msgget": 186,
        "msgctl": 187,
        "msgrcv": 188,
        "msgsnd": 189,
        "semget": 190,
        "semctl": 191,
        "semtimedop": 192,
        "semop": 193,
        "shmget": 194,
        "shmctl": 195,
        "shmat": 196,
        "shmdt": 197,
        "mq_open": 180,
    },
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
    """The namespace-less jail's program: the keyring, _UNCOUNTED and _FALLBACK_DENIED answer EPERM, clone with
    CLONE_NEW* flags too, clone3 ENOSYS; None where this ABI's numbers are not known here."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    return _program(
        machine, {**_KEYRING[machine], **_UNCOUNTED[machine], **_FALLBACK_DENIED[machine]}, clone_flags=True
    )


def no_namespaces_filter(machine: str | None = None) -> bytes | None:
    """What Docker's default seccomp profile does to namespaces (unshare, setns, clone with CLONE_NEW* flags:
    EPERM; clone3: ENOSYS), for a stand-in of Gradescope's and PrairieLearn's containers in tests."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    return _program(machine, _NAMESPACES[machine], clone_flags=True)


# Installs a program (hex, argv[1]) on this process and execs argv[3:]: run as `python -I -S -c LOADER HEX WRITABLE
# CMD...` (only the standard library; no file of ours needs to be readable where it runs). no_new_privs first:
# an unprivileged process may load a filter only with it, and nothing after it can gain privileges. WRITABLE, where
# not empty, is the one folder the process may make or change files in (Landlock: every other folder, /tmp and
# /dev/shm included, only read), with /dev/null, /dev/zero and /dev/full writable as files.
LOADER = r"""
import ctypes, os, struct, sys
prog = bytes.fromhex(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def fail(what):
    sys.stderr.write("course-jail: " + what + " could not be installed: " + os.strerror(ctypes.get_errno()) + "\n")
    sys.exit(126)
if libc.prctl(38, 1, 0, 0, 0) != 0:
    fail("no_new_privs")
if sys.argv[2]:
    abi = libc.syscall(444, None, 0, 1)
    if abi < 1:
        fail("Landlock")
    handled = 2 | 16 | 32 | 64 | 128 | 256 | 512 | 1024 | 2048 | 4096 | (8192 if abi >= 2 else 0)
    files = 2 | (16384 if abi >= 3 else 0)
    handled |= files
    attr = struct.pack("=Q", handled)
    ruleset = libc.syscall(444, ctypes.c_char_p(attr), len(attr), 0)
    if ruleset < 0:
        fail("Landlock")
    for path, access in [(sys.argv[2], handled), ("/dev/null", files), ("/dev/zero", files), ("/dev/full", files)]:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        if libc.syscall(445, ruleset, 1, ctypes.c_char_p(struct.pack("=Qi", access, fd)), 0) != 0:
            fail("Landlock")
        os.close(fd)
    if libc.syscall(446, ruleset, 0) != 0:
        fail("Landlock")
    os.close(ruleset)
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = struct.pack("HL", len(prog) // 8, ctypes.addressof(buf))
if libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) != 0:
    fail("seccomp")
os.execv(sys.argv[3], sys.argv[3:])
"""


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 where there is none, or where this process's seccomp profile refuses
    it): a child started here can be held to one writable folder where it is at least 1."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, int(libc.syscall(444, None, 0, 1)))  # landlock_create_ruleset(NULL, 0, VERSION)


def loader_argv(python: str, program: bytes, argv: list[str], *, writable: str | None = None) -> list[str]:
    """`argv` run under `program`, installed by LOADER in `python` (an interpreter the process can run); with
    `writable`, held by Landlock to making and changing files in that folder alone."""
    return [python, "-I", "-S", "-c", LOADER, program.hex(), writable or "", *argv]
