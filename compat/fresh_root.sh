#!/usr/bin/env bash
# The Gradescope artefact's setup.sh in a fresh root, as the platform builds it: a minbase debootstrap of DISTRO
# (bookworm, trixie: Debian 12, 13; jammy, noble: Ubuntu 22.04, 24.04), chrooted, as root, packages from the
# distribution's archive and PyPI only (GitHub is not reachable from this project's machines). Then, with
# GRADE=1, each lab's solution through run_autograder's door in that root, in a memory cgroup of its own, from
# a cold cache (the root's files evicted from the page cache first): the container's peak memory, the score.
# Appends one JSON line per step to compat/fresh-roots.jsonl (`make fresh-roots` runs all four distributions).
#   compat/fresh_root.sh DISTRO [LAB]     (root; debootstrap; ~3 min to bootstrap, 2-5 min to build)
#   COURSE_ROOTS   where the roots live (default /var/tmp/course-roots; an existing root is reused, its
#                  /autograder made anew)
#   GRADE=1        grade the solutions (LAB, or all labs) after the build
#   REUSE=1        keep the root's installed environment (a build's record then says reused=1)
set -euo pipefail
DISTRO="$1"
LAB="${2:-}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
ROOTS="${COURSE_ROOTS:-/var/tmp/course-roots}"
ROOT="$ROOTS/$DISTRO"
OUT="$HERE/compat/fresh-roots.jsonl"
PY="${COURSE_PYTHON:-$HERE/.venv/bin/python}"
case "$DISTRO" in
  bookworm|trixie) MIRROR=http://deb.debian.org/debian; EXTRA=(); COMPONENTS="main" ;;
  jammy) MIRROR=http://archive.ubuntu.com/ubuntu; EXTRA=(--no-check-gpg); COMPONENTS="main universe" ;;
  noble) MIRROR=http://archive.ubuntu.com/ubuntu; EXTRA=(--no-check-gpg); COMPONENTS="main universe" ;;
  *) echo "DISTRO: bookworm, trixie, jammy or noble" >&2; exit 2 ;;
esac
mkdir -p "$ROOTS"
if [ ! -x "$ROOT/bin/bash" ]; then
  script=()
  [ -e "/usr/share/debootstrap/scripts/$DISTRO" ] || script=(/usr/share/debootstrap/scripts/gutsy)
  debootstrap "${EXTRA[@]}" --variant=minbase "$DISTRO" "$ROOT" "$MIRROR" "${script[@]}" >/dev/null
fi
# What the platforms' images have: Ubuntu's Docker images list main and universe with -updates and -security
# (and Gradescope's harness a python3); Debian's, main with -updates.
if [ "$MIRROR" = http://archive.ubuntu.com/ubuntu ]; then
  printf 'deb %s %s %s\n' "$MIRROR" "$DISTRO" "$COMPONENTS" "$MIRROR" "$DISTRO-updates" "$COMPONENTS" \
    "$MIRROR" "$DISTRO-security" "$COMPONENTS" > "$ROOT/etc/apt/sources.list"
else
  printf 'deb %s %s %s\n' "$MIRROR" "$DISTRO" "$COMPONENTS" "$MIRROR" "$DISTRO-updates" "$COMPONENTS" \
    > "$ROOT/etc/apt/sources.list"
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# This machine reaches the registries through an HTTPS proxy with its own CA: the root trusts it too (the
# ca-certificates that setup.sh installs adds /usr/local/share/ca-certificates; pip is pointed at that bundle).
# Nothing else of the host goes in.
mkdir -p "$ROOT/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mountpoint -q "$ROOT/dev" || mount --rbind /dev "$ROOT/dev"
# a sysfs of its own (libtpu's tcmalloc reads the CPUs there) without the host's cgroup mounts: as in a container
# whose cgroups the grader may not write, the jail's limits are rlimits
mountpoint -q "$ROOT/sys" || mount -t sysfs -o ro sysfs "$ROOT/sys"
trap 'umount -l "$ROOT/dev" 2>/dev/null || true; umount "$ROOT/proc" "$ROOT/sys" 2>/dev/null || true' EXIT
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                  PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$@"; }
[ -x "$ROOT/usr/sbin/update-ca-certificates" ] && in_root update-ca-certificates >/dev/null 2>&1
if [ "$MIRROR" = http://archive.ubuntu.com/ubuntu ]; then
  in_root bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null'
fi

record() { "$PY" - "$OUT" "$@" <<'PY'
import json, os, subprocess, sys, time
out, fields = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
commit = subprocess.run(["git", "-C", os.path.dirname(out), "describe", "--always", "--dirty"], capture_output=True,
                        text=True).stdout.strip()
rec = {"at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "commit": commit, "machine": os.uname().nodename,
       "cpus": os.cpu_count(), "load": round(os.getloadavg()[0], 1), **fields}
with open(out, "a") as f:
    f.write(json.dumps(rec) + "\n")
print(json.dumps(rec))
PY
}

# The artefact, as an instructor builds it, unzipped where Gradescope puts it
BUILD="$(mktemp -d)"
"$PY" -c 'from course_tools.cli import main; main()' autograder gradescope --lab "${LAB:-lab-1.1-first-kernels}" --out "$BUILD" >/dev/null
# REUSE=1 keeps the environment a previous build installed (pip then finds every pin satisfied): to grade again
if [ -n "${REUSE:-}" ] && [ -d "$ROOT/autograder/course-env" ]; then
  find "$ROOT/autograder" -mindepth 1 -maxdepth 1 ! -name course-env -exec rm -rf {} +
else
  rm -rf "$ROOT/autograder"
fi
mkdir -p "$ROOT/autograder/source"
"$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$BUILD/autograder.zip" "$ROOT/autograder/source"
rm -rf "$BUILD"
start=$(date +%s)
set +e
in_root bash -c 'cd /autograder/source && bash ./setup.sh' > "$ROOTS/$DISTRO-setup.log" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
python_used="$(sed -n 's/^course environment from //p' "$ROOTS/$DISTRO-setup.log" | head -n 1)"
env_mb="$(du -sm "$ROOT/autograder/course-env" 2>/dev/null | cut -f1)"
record step=setup reused="${REUSE:-0}" distro="$DISTRO" "os=$(. "$ROOT/etc/os-release"; echo "$PRETTY_NAME")" rc="$rc" seconds="$took" \
  "python=$python_used" env_mb="${env_mb:-0}" "tail=$(tail -n 3 "$ROOTS/$DISTRO-setup.log" | tr '\n' ' ' | cut -c1-300)"
[ "$rc" = 0 ] || exit "$rc"
[ -n "${GRADE:-}" ] || exit 0

# Each lab's solution through the door, in a memory cgroup of its own, from a cold cache
labs="${LAB:-$("$PY" -c 'from autograder.course_manifest import manifest; print(" ".join(l.id for l in manifest().labs))')}"
for lab in $labs; do
  rm -rf "$ROOT/autograder/submission" "$ROOT/autograder/results"
  mkdir -p "$ROOT/autograder/submission"
  "$PY" - "$lab" "$ROOT/autograder/submission" <<'PY'
import sys
from pathlib import Path
import nbformat
from autograder.course_manifest import manifest
from course_tools.demo import filled_in
lab = manifest().lab(sys.argv[1])
nbformat.write(filled_in(lab.id), Path(sys.argv[2]) / Path(lab.notebook).name)
PY
  "$PY" - "$ROOT" <<'PY'
# cold: the root's files out of the page cache (only these files: the machine's other caches stay)
import os, sys
for top in ("autograder", "usr/lib", "usr/local"):
    for d, _, files in os.walk(os.path.join(sys.argv[1], top)):
        for f in files:
            try:
                fd = os.open(os.path.join(d, f), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
PY
  cg="/sys/fs/cgroup/memory/course-freshroot-$$"
  mkdir "$cg"
  start=$(date +%s)
  sh -c 'echo $$ > "$1/tasks"; shift; exec "$@"' _ "$cg" chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    GRADESCOPE_ROOT=/autograder PYTHONPATH=/autograder/source/course \
    /autograder/course-env/bin/python -m autograder.doors.gradescope --lab "$lab" > "$ROOTS/$DISTRO-$lab.log" 2>&1 || true
  took=$(( $(date +%s) - start ))
  peak=$(( $(cat "$cg/memory.max_usage_in_bytes") / 1048576 ))
  for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.5; done   # the door's last processes are being reaped
  score="$("$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["score"], d["extra_data"].get("jail"))' "$ROOT/autograder/results/results.json" 2>/dev/null || echo "none")"
  record step=grade distro="$DISTRO" lab="$lab" seconds="$took" peak_mb_cold="$peak" "score_jail=$score"
done
