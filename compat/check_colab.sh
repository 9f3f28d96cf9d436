#!/usr/bin/env bash
# Colab's TPU runtime, stood in for on this CPU machine: the Debian trixie root of compat/newest_jax.sh
# (Python 3.13, built if missing), a fresh venv per notebook holding Colab's versions (compat/colab-tpu.txt:
# jax/jaxlib 0.7.2, libtpu 0.0.21.1, numpy, ipykernel, nbformat, pydantic, PyYAML) and a `google.colab` module
# imported at kernel start. Each released notebook, filled in from the solutions, with COURSE_PIP pointing at
# the release's wheel, runs there from its set-up cell to a last cell that compiles the lab's solution kernels
# with the libtpu the set-up cell left. Writes compat/colab.json (compat/colab_standin.py). Needs root.
#   compat/check_colab.sh            what `make check-colab` runs
#   COLAB_ONLY=lab-1.1 compat/check_colab.sh   the notebooks whose name contains that text
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${NEWEST_JAX_ROOT:-/var/tmp/pallas-from-zero-newest-jax}
PY=${PYTHON:-python}
[ -x "$ROOT/usr/bin/python3" ] || compat/newest_jax.sh root

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
bind() { mountpoint -q "$ROOT/$1" || { mount --bind "/$1" "$ROOT/$1"; mounted+=("$ROOT/$1"); }; }
# As Colab: no JAX_PLATFORMS, no course variables; pip and the kernel see only the root.
in_root() { chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/venv-colab/bin:/usr/bin:/bin LANG=C.UTF-8 \
            PIP_DISABLE_PIP_VERSION_CHECK=1 bash -c "$1"; }
# /sys too: libtpu's tcmalloc reads the CPU count there and aborts without it ("CHECK in NumCPUs")
bind proc; bind dev; bind sys
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"

rm -rf "$ROOT/colab" && mkdir -p "$ROOT/colab"
"$PY" compat/colab_standin.py prepare "$ROOT/colab"
cp compat/colab_standin.py compat/colab-tpu.txt "$ROOT/colab/"
# google.colab: a stand-in package on the venv's path, imported by every kernel before its first cell.
mkdir -p "$ROOT/colab/stub/google/colab" "$ROOT/root/.ipython/profile_default/startup"
echo '"""Stand-in of Colab'"'"'s google.colab (compat/check_colab.sh)."""' > "$ROOT/colab/stub/google/colab/__init__.py"
# jax imports google.colab.output where google.colab is imported (its debugger's Colab front end)
echo '"""Stand-in of google.colab.output: present, unused."""' > "$ROOT/colab/stub/google/colab/output.py"
echo 'import google.colab  # the stand-in: Colab imports it before any cell' \
  > "$ROOT/root/.ipython/profile_default/startup/00-colab.py"
in_root "python3 --version | cut -d' ' -f2" > "$ROOT/colab/python-version"

for nb in "$ROOT"/colab/filled/*.ipynb; do
  name=$(basename "$nb")
  [[ -z "${COLAB_ONLY:-}" || "$name" == *"$COLAB_ONLY"* ]] || continue
  # A fresh Colab session per notebook: Colab's versions, then the notebook's own set-up cell does the rest.
  in_root "rm -rf /venv-colab && python3 -m venv /venv-colab &&
           pip install -q -r /colab/colab-tpu.txt nbclient &&
           echo /colab/stub > \$(python -c 'import site; print(site.getsitepackages()[0])')/colab-stub.pth &&
           cd /colab/filled && python /colab/colab_standin.py run /colab/filled/$name" || true
done
mkdir -p "$ROOT/colab/filled"
"$PY" compat/colab_standin.py record "$ROOT/colab"
