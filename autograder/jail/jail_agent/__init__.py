"""What runs inside the grading jail, and the wire format both sides speak.

This folder is bound read-only into the jail as the top-level package `jail_agent` (it imports only the
standard library, numpy, IPython, jax and the student helpers `pallas_course`: nothing of the grader).
It runs the notebook's cells and the student's functions; it decides nothing. Everything it sends back is
plain data (JSON, arrays as .npy bytes), and the grader treats all of it as untrusted.
"""
