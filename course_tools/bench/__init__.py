"""Benchmarks of the grader itself (how long grading takes); the kernels' benchmarks are `course bench`."""
