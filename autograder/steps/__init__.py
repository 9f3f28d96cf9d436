"""The pipeline's steps, one a module, and the runner (`pipeline`: the `Grading` record, each door's list of
steps, `run`): discover (which files are graded), submission (read: the bytes once), identify (a validated
notebook and its lab), restore (the instructor's cells put back), execute (engines by name; the cells to the
jail, the hidden tests here), score (nbgrader's rule), results (what grading produces), record and store
(keep and reuse what was graded), report, feedback, export (results.json/.csv, what a student may receive,
nbgrader's CSV and gradebook). A step may import the other steps, labs/ (the checks it runs), jail/, judge/,
the top-level modules and pallas_course; never doors/.
"""
