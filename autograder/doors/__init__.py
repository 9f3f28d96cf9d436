"""The doors: every way into the pipeline, each the list of steps it runs (autograder.steps.pipeline).
`course_grade` is `course grade` for a class (discover -> read -> grade -> report; `batch` schedules the grade
step on local workers or Dask); `nbgrader_engine` is nbgrader's (its pre-convert hook, exporter and
JailedExecute) with `nbgrader_setup`, nbgrader's configuration from course.yml; `gradescope` and `prairielearn`
are the platforms' (`python -m autograder.doors.gradescope`), each writing its platform's results.json, with
what both share in `platforms`. A door may import anything of autograder and pallas_course; nothing of the
grader imports a door but another door (the instructor tools, course_tools, call them).
"""
