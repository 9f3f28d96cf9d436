# Common tasks. Each target calls the `course` command; see `course --help`.
.PHONY: bench

# Time the GATE 01 workloads here (reduced, non-gating shapes off a TPU) and append records to bench/.
bench:
	course bench
	course gates

# 20 LAB·1.1 submissions: serial `nbgrader autograde` vs `course grade --jobs 2`; same scores, the throughput
# ratio; writes bench/grading-batch.json with its provenance.
.PHONY: bench-batch
bench-batch: bytecode
	python -m course_tools.bench.grading_batch

# What grading costs in CPU seconds (issue 36): the LAB·1.1 class's CPU per notebook, everything each command starts
# (workers, jails, judges, the judges' zygotes: a cpuacct cgroup per command), course grade against plain nbgrader,
# with the judges forked from the zygote and without, and throughput by --jobs 1 and 2; writes bench/grading-cpu.json.
.PHONY: bench-cpu
bench-cpu: bytecode
	python -m course_tools.bench.grading_batch --class "lab-1.1 x 20" --no-door --sweep 1,2 --spawned-judges --out bench/grading-cpu.json

# Where one grading's time goes: the LAB·1.1 solution through `course grade` (COURSE_GRADE_TIMELINE: the grader's,
# the judge's and the jail agent's spans) against papermill alone, 5 alternated pairs; writes
# bench/grading-profile.json with its provenance.
.PHONY: bench-profile
bench-profile: bytecode
	python -m course_tools.bench.grading_profile

# One LAB·1.1 submission through `course grade`, papermill alone and `nbgrader autograde`, and whole-stage
# submissions through `course grade`; writes bench/grading-time.json with its provenance.
.PHONY: bench-grading
bench-grading: bytecode
	python -m course_tools.bench.grading_time

# Every import's bytecode written once, as a pip install leaves it (uv, or PYTHONDONTWRITEBYTECODE, leaves none:
# then each grading process compiles its imports again, seconds each). The grading benchmarks record which.
.PHONY: bytecode
bytecode:
	python -m compileall -q -j 0 $$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
		autograder pallas_course course_tools > /dev/null

# The course on today's JAX (what Colab runs): a Debian trixie root from Debian's packages (Python 3.13) with
# the newest jax 0.12.x from PyPI; runs every solution notebook, the demo and the fast tests there and writes
# compat/newest-jax.json. Needs root; ~1 GB of downloads the first time (the root is kept and reused).
.PHONY: check-newest-jax
check-newest-jax:
	compat/newest_jax.sh

# LAB·1.4's VMEM budget line, predicted and confirmed by the real TPU compiler (libtpu, deviceless) for the compile
# rules' chips; writes bench/budget-line.json with its provenance (the site shows it).
.PHONY: budget-line
budget-line:
	python -m course_tools.bench.budget_line

# MXU passes by dtype and precision, counted in Mosaic's LLO output (libtpu, deviceless): bench/mxu-passes.json,
# which course.yml's chips `mxu_passes` must equal (tests/test_mxu_passes.py).
.PHONY: mxu-passes
mxu-passes:
	python -m course_tools.bench.mxu_passes

# What the TPU compiler does with block shapes and VMEM (libtpu): bench/tiling-compile.json, bench/vmem-padding.json.
.PHONY: tpu-layout
tpu-layout:
	python -m course_tools.bench.tpu_layout

# LAB·1.4's recorded CPU trace (TPU interpret mode): pallas_course/records/lab-1.4-cpu-trace.json.
.PHONY: cpu-trace
cpu-trace:
	python -m course_tools.bench.cpu_trace

# Colab's TPU runtime stood in for on this CPU (Python 3.13 root of check-newest-jax, Colab's versions, a
# google.colab module): every released notebook, filled in, runs from its set-up cell; every solution kernel
# compiles with the libtpu that cell leaves. Writes compat/colab.json. Needs root; reuses the newest-jax root.
.PHONY: check-colab
check-colab:
	compat/check_colab.sh

# Every supported configuration (door x jail x memory rule: docs/grader.md, "Configurations") over the honest and
# hostile corpus (tests/hostile.py, issue 33's cases): the same scores, test by test. Needs root and bubblewrap.
# A part: COURSE_CONFIG_CASES='ok-solution,c33-*' make configurations
.PHONY: configurations
configurations:
	python -m pytest -m slow -p no:cacheprovider tests/test_configurations.py

# The Gradescope artefact's setup.sh in fresh roots (Debian 12 and 13, Ubuntu 22.04 and 24.04: debootstrap minbase,
# chrooted, packages from the distributions' archives and PyPI only), then each lab's solution through the door in
# the Debian 12 root from a cold cache (its peak memory: bench/platform-needs.json). Appends to
# compat/fresh-roots.jsonl. Needs root and debootstrap; ~5 min per root, ~2 GB each (kept in COURSE_ROOTS).
.PHONY: fresh-roots
fresh-roots:
	for d in bookworm trixie jammy noble; do compat/fresh_root.sh $$d || exit 1; done
	GRADE=1 REUSE=1 compat/fresh_root.sh bookworm
