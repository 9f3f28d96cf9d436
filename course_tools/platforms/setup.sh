#!/usr/bin/env bash
# Pallas from Zero's Gradescope autograder for @LAB@ (built by `course autograder gradescope`).
# Gradescope runs this once, as root, in /autograder/source when it builds the image (Ubuntu 22.04). The system's
# python3 (3.10, which Gradescope's own harness uses) is left as it is: the course's Python 3.11 and its pinned
# packages go beside it, in /autograder/course-env. The same script runs on Debian 12 (its python3.11 is used).
#   GRADESCOPE_ROOT          the root instead of /autograder (tests)
#   COURSE_SETUP_PYTHON      a Python 3.11 to build the environment from
#   COURSE_SETUP_REUSE_SITE  a site-packages folder already holding requirements.txt, put on the environment's
#                            path instead of installing (tests; its own .pth files are not run)
#   COURSE_SETUP_OFFLINE     skip apt-get (its packages are installed already)
set -euo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SRC="$ROOT/source"
ENV="$ROOT/course-env"
UV_DIR="$ROOT/course-uv"
PY_DIR="$ROOT/course-python"

# 1. bubblewrap (the jail, where the container may make namespaces) and util-linux's setpriv and prlimit (the
#    jail without namespaces, where it may not: the grader probes at run time)
if [ -z "${COURSE_SETUP_OFFLINE:-}" ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends bubblewrap util-linux ca-certificates python3-pip >/dev/null
fi

# 2. Python 3.11: the system's where it has one with venv (Debian 12); else a CPython 3.11 that uv (from PyPI,
#    installed with the system's pip into its own folder) downloads, kept where the jail's uid can read it
PY="${COURSE_SETUP_PYTHON:-}"
if [ -z "$PY" ] && command -v python3.11 >/dev/null && python3.11 -c 'import ensurepip, venv' 2>/dev/null; then
  PY="$(command -v python3.11)"
fi
if [ -z "$PY" ]; then
  python3 -m pip install --quiet --target "$UV_DIR" "uv==@UV_VERSION@"
  export UV_PYTHON_INSTALL_DIR="$PY_DIR"
  "$UV_DIR/bin/uv" python install 3.11
  PY="$("$UV_DIR/bin/uv" python find 3.11)"
fi
"$PY" -m venv "$ENV"

# 3. the pinned packages (the course's own code stays in source/course, on the grader's PYTHONPATH only)
if [ -n "${COURSE_SETUP_REUSE_SITE:-}" ]; then
  "$ENV/bin/python" - "$COURSE_SETUP_REUSE_SITE" <<'PY'
import pathlib, sys, sysconfig
pathlib.Path(sysconfig.get_paths()["purelib"], "course-reused.pth").write_text(sys.argv[1] + "\n")
PY
else
  "$ENV/bin/python" -m pip install --quiet --no-cache-dir -r "$SRC/course/requirements.txt"
fi
"$ENV/bin/python" -m compileall -q "$SRC/course" >/dev/null || true

# 4. modes: the grader's files (source/: checks, keys, solutions, course.yml) unreadable to other users, hence
#    to the jail's uid; the environment and its interpreter readable (the jail runs them)
chmod -R o= "$SRC"
chmod o+x "$ROOT"
chmod -R o+rX "$ENV"
[ -d "$PY_DIR" ] && chmod -R o+rX "$PY_DIR"

# 5. it imports
PYTHONPATH="$SRC/course" "$ENV/bin/python" -c "import jax, nbgrader, autograder.doors.gradescope; print('course autograder ready: jax', jax.__version__)"
