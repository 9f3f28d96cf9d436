# Common tasks. Each target calls the `course` command; see `course --help`.
.PHONY: bench

# Time the GATE 01 workloads here (reduced, non-gating shapes off a TPU) and append records to bench/.
bench:
	course bench
	course gates

# 20 LAB·1.1 submissions: serial `nbgrader autograde` vs `course grade --jobs 2`; same scores, the throughput
# ratio; writes bench/grading-batch.json with its provenance.
.PHONY: bench-batch
bench-batch:
	python -m autograder.bench_batch

# One LAB·1.1 submission through `course grade`, papermill alone and `nbgrader autograde`, and whole-stage
# submissions through `course grade`; writes bench/grading-time.json with its provenance.
.PHONY: bench-grading
bench-grading:
	python -m autograder.bench_grading
