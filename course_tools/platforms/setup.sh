#!/usr/bin/env bash
# Pallas from Zero's Gradescope autograder for @LAB@ (built by `course autograder gradescope`).
# Gradescope runs this once, as root, in /autograder/source when it builds the image. The system's python3
# (Gradescope's own harness uses it) is left as it is: the course's environment goes beside it, in
# /autograder/course-env, made from the distribution's own Python where its version is one the pins have wheels
# for (@PYTHONS@), installed with apt: Ubuntu 22.04 (Gradescope's default image: python3.11 from universe),
# Ubuntu 24.04 (3.12), Debian 12 (3.11), Debian 13 (3.13). Only where apt has none of them does it fetch a
# standalone CPython with uv (from GitHub). compat/fresh_root.sh builds this script in fresh roots.
#   GRADESCOPE_ROOT          the root instead of /autograder (tests)
#   COURSE_SETUP_PYTHON      a Python (@PYTHONS@) to build the environment from
#   COURSE_SETUP_REUSE_SITE  a site-packages folder already holding requirements.txt, hard-linked into the
#                            environment instead of installing (tests; its own .pth files are left out)
#   COURSE_SETUP_OFFLINE     skip apt-get (its packages are installed already)
#   COURSE_SETUP_PLAN        print the Python and apt packages it would use, and stop (tests)
set -euo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SRC="$ROOT/source"
ENV="$ROOT/course-env"
UV_DIR="$ROOT/course-uv"
PY_DIR="$ROOT/course-python"
PYTHONS="@PYTHONS@"          # the versions requirements.txt's pins have wheels for, the tested one first

has_venv() { "$1" -c 'import ensurepip, venv' 2>/dev/null; }
apt_has() { command -v apt-cache >/dev/null && [ -n "$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]; }

# Which Python: the system python3's own version if the pins allow it (what the distribution maintains), else
# the first of PYTHONS that is installed with venv or that apt offers, else none (uv below).
pick_version() {
  local own candidates=()
  own="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
  for v in $PYTHONS; do [ "$v" = "$own" ] && candidates+=("$v"); done
  for v in $PYTHONS; do [ "$v" != "$own" ] && candidates+=("$v"); done
  for v in "${candidates[@]}"; do
    if command -v "python$v" >/dev/null && has_venv "python$v"; then echo "$v installed"; return; fi
    if apt_has "python$v-venv"; then echo "$v apt"; return; fi
  done
  echo "none"
}

# 1. the jail's tools: bubblewrap (where the container may make namespaces) and util-linux's setpriv and prlimit
#    (the jail without namespaces, where it may not: the grader probes at run time)
APT=(bubblewrap util-linux ca-certificates)
PY="${COURSE_SETUP_PYTHON:-}"
CHOICE="given"
if [ -z "$PY" ]; then
  if [ -z "${COURSE_SETUP_OFFLINE:-}" ] && command -v apt-get >/dev/null && [ -z "${COURSE_SETUP_PLAN:-}" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
  fi
  CHOICE="$(pick_version)"
  case "$CHOICE" in
    *" apt") APT+=("python${CHOICE% apt}" "python${CHOICE% apt}-venv") ;;
    none) APT+=(python3-pip) ;;
  esac
fi
if [ -n "${COURSE_SETUP_PLAN:-}" ]; then
  echo "python: $CHOICE"
  echo "apt: ${APT[*]}"
  exit 0
fi
if [ -z "${COURSE_SETUP_OFFLINE:-}" ] && command -v apt-get >/dev/null; then
  apt-get install -y -qq --no-install-recommends "${APT[@]}" >/dev/null
fi

# 2. the Python: given, the distribution's, or (no apt, or none of PYTHONS in it) a standalone CPython that uv
#    (from PyPI, installed with the system's pip into its own folder) downloads from GitHub, kept where the jail's
#    uid can read it
case "$CHOICE" in
  *" installed"|*" apt") PY="$(command -v "python${CHOICE%% *}")" ;;
  none)
    first="${PYTHONS%% *}"
    python3 -m pip install --quiet --target "$UV_DIR" "uv==@UV_VERSION@"
    export UV_PYTHON_INSTALL_DIR="$PY_DIR"
    "$UV_DIR/bin/uv" python install "$first"
    PY="$("$UV_DIR/bin/uv" python find "$first")" ;;
esac
echo "course environment from $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
"$PY" -m venv "$ENV"

# 3. the pinned packages (the course's own code stays in source/course, on the grader's PYTHONPATH only)
if [ -n "${COURSE_SETUP_REUSE_SITE:-}" ]; then
  # hard links where the folder is on the same file system (bubblewrap's jail then finds the packages inside the
  # environment it binds), without the reused site's own .pth files and editable installs; else a .pth to it
  "$ENV/bin/python" - "$COURSE_SETUP_REUSE_SITE" <<'PY'
import os, pathlib, shutil, subprocess, sys, sysconfig
site, reused = pathlib.Path(sysconfig.get_paths()["purelib"]), pathlib.Path(sys.argv[1])
before = {p.name for p in site.iterdir()}
if subprocess.run(["cp", "-al", "-n", f"{reused}/.", f"{site}/"], capture_output=True).returncode == 0:
    for p in site.iterdir():
        if p.name not in before and (p.suffix == ".pth" or p.name.startswith("__editable__")):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
else:
    (site / "course-reused.pth").write_text(f"{reused}\n")
PY
else
  "$ENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check -r "$SRC/course/requirements.txt"
fi
"$ENV/bin/python" -m compileall -q "$SRC/course" >/dev/null || true

# 4. modes: the grader's files (source/: checks, keys, solutions, course.yml) unreadable to other users, hence
#    to the jail's uid; what a jail reads through binds of the tree (bubblewrap's uid 65534: the agent and the
#    student helpers, @JAIL_READS@) readable again, but for the links the tree holds copies of (@JAIL_HIDDEN@:
#    the jail gets the public course.yml over it); the environment and its interpreter readable (the jail runs them)
chmod -R o= "$SRC"
for rel in @JAIL_READS@; do chmod -R o+rX "$SRC/course/$rel"; done
for rel in @JAIL_HIDDEN@; do chmod o= "$SRC/course/$rel"; done
chmod o+x "$ROOT"
chmod -R o+rX "$ENV"
[ -d "$PY_DIR" ] && chmod -R o+rX "$PY_DIR"

# 5. it imports
PYTHONPATH="$SRC/course" "$ENV/bin/python" -c "import jax, nbgrader, autograder.doors.gradescope; print('course autograder ready: jax', jax.__version__)"
