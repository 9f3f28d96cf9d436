# Common tasks. Each target calls the `course` command; see `course --help`.
.PHONY: bench

# Time the GATE 01 workloads here (reduced, non-gating shapes off a TPU) and append records to bench/.
bench:
	course bench
	course gates
