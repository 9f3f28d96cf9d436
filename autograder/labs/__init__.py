"""The hidden checks: one module per lab (lab_1_1 ... lab_1_6), each public function one graded test named
as in course.yml, and what they stand on: `harness` (the checks' API: call a student's function through the
jail, look at what it launched, compare against a float64 reference, fail with one clear sentence),
`reference_kernels` (the chapter's kernels, one home), `walk_key` (LAB·1.5's key over its walk; the keys
themselves are data in autograder/keys/) and `disclosure` (what a message that may reach a student may say).
They run in the grading process, on what the jail and the judge answer: they may import jail/ (the session's
proxies), judge/ (the compile rule), the top-level modules and pallas_course; never steps/ or doors/.
"""
