#!/usr/bin/env bash
# The course on today's JAX: a Debian trixie root (Python >= 3.12, from Debian's packages) with the newest
# jax 0.12.x from PyPI and the rest of requirements.txt unchanged. Runs every solution notebook, the demo
# and the fast tests there, and writes compat/newest-jax.json.
#   compat/newest_jax.sh root   build (or reuse) the root and its venv: ~1 GB of downloads, minutes
#   compat/newest_jax.sh run    copy this working tree in, run the checks, write the record
#   compat/newest_jax.sh        both (what `make check-newest-jax` runs)
# Needs root (debootstrap, chroot, bind mounts). NEWEST_JAX_ROOT moves the root (default /var/tmp/pallas-from-zero-newest-jax).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
# Outside the checkout: the root has /proc and /dev bound into it while it runs.
ROOT=${NEWEST_JAX_ROOT:-/var/tmp/pallas-from-zero-newest-jax}
SUITE=${NEWEST_JAX_SUITE:-trixie}
# With its own libtpu (the [tpu] extra): the compile step runs there too.
JAX_SPEC=${NEWEST_JAX_SPEC:-"jax[tpu]>=0.12,<0.13"}
# Fast tests: everything but the end-to-end runs of whole notebooks, batches, mutants and browsers, and the
# grading tests (they need the jail, and a chrooted process may not make user namespaces; the record script
# deselects the one jailed test of test_grading_steps.py). test_errors.py matters most here: it runs real
# Pallas mistakes and reads jax's own error messages, which change between releases.
FAST_TESTS=${NEWEST_JAX_TESTS:-"tests/test_rebuild.py tests/test_check.py tests/test_chips.py tests/test_legality.py tests/test_schedule.py tests/test_walks.py tests/test_manifest.py tests/test_wire.py tests/test_bench.py tests/test_gates.py tests/test_cli_schedule.py tests/test_cli_bench.py tests/test_site_build.py tests/test_restore.py tests/test_import_graph.py tests/test_errors.py tests/test_grading_steps.py"}

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
bind() { mountpoint -q "$ROOT/$1" || { mount --bind "/$1" "$ROOT/$1"; mounted+=("$ROOT/$1"); }; }
in_root() { chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/venv/bin:/usr/bin:/bin LANG=C.UTF-8 \
            JAX_PLATFORMS=cpu PIP_DISABLE_PIP_VERSION_CHECK=1 FAST_TESTS="$FAST_TESTS" bash -c "$1"; }

build_root() {
  if [ ! -x "$ROOT/usr/bin/python3" ]; then
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
    mkdir -p "$ROOT"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates,git \
      "$SUITE" "$ROOT" http://deb.debian.org/debian
  fi
  # pip inside the root fails with CERTIFICATE_VERIFY_FAILED without the host's CA bundle.
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  bind proc; bind dev; bind sys   # /sys: libtpu's tcmalloc aborts without it ("CHECK in NumCPUs")
  # requirements.txt less the repository itself and the jax pins (libtpu's too), which JAX_SPEC replaces.
  grep -vE '^(jax|jaxlib|libtpu|numpy|ml_dtypes)==|^-e ' requirements.txt > "$ROOT/requirements-newest.txt"
  in_root "[ -x /venv/bin/python ] || python3 -m venv /venv
           pip install -q '$JAX_SPEC' -r /requirements-newest.txt"
}

run_checks() {
  bind proc; bind dev; bind sys   # /sys: libtpu's tcmalloc aborts without it ("CHECK in NumCPUs")
  rm -rf "$ROOT/course"
  # The history too (4 MB): `course gates` judges a record's commit against it, and accepts any without a .git
  # (a pip-installed package), so test_cli_bench's stale-record test fails on a copy without one.
  git clone -q --no-checkout "$REPO" "$ROOT/course" && git -C "$ROOT/course" reset -q
  # The working tree as git sees it (tracked and new files, nothing ignored).
  git ls-files -z -co --exclude-standard | tar --null -T - -c | tar -x -C "$ROOT/course"
  # The commit, then what git says differs from it (others' edits in a shared checkout are copied too).
  # (Less the record itself, which this run rewrites.)
  { git rev-parse HEAD; git status --porcelain -- . ':!compat/newest-jax.json'; } > "$ROOT/course/.commit"
  in_root "cd /course && pip install -q --no-deps -e . && python compat/newest_jax_record.py" \
    || status=$?
  cp "$ROOT/course/compat/newest-jax.json" compat/newest-jax.json
  echo "wrote compat/newest-jax.json"
  return "${status:-0}"
}

export FAST_TESTS
case "${1:-all}" in
  root) build_root ;;
  run)  run_checks ;;
  all)  build_root && run_checks ;;
  *)    echo "usage: $0 [root|run|all]" >&2; exit 2 ;;
esac
