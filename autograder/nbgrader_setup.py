"""nbgrader's configuration, derived from course.yml (nbgrader_config.py at the root calls `configure`)."""
from __future__ import annotations

import os
from typing import Any

from autograder.execute import CELL_TIMEOUT_S, GRADING_MODE
from autograder.guard import KERNEL_ARGUMENTS
from pallas_course.manifest import REPO_ROOT, manifest
from pallas_course.runtime import MODE_ENV

# What nbgrader puts where a solution region was. A clear error beats a silent `pass`.
CODE_STUB = '# YOUR CODE HERE\nraise NotImplementedError("not written yet: replace this line with your code")'
TEXT_STUB = "YOUR ANSWER HERE"



def configure(c: Any) -> None:
    m = manifest()
    c.CourseDirectory.course_id = m.course.id
    c.CourseDirectory.root = str(REPO_ROOT)
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "labs"
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = TEXT_STUB
    c.OverwriteCells.add_missing_cells = True   # a deleted hidden-test cell comes back and runs
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
    # The tamper guard starts with every kernel, as under `course grade` (autograder/guard.py): a hidden test
    # after a notebook that replaced numpy, jax or the grader's checks scores 0 on both paths.
    c.Execute.extra_arguments = list(KERNEL_ARGUMENTS)
    # Same forced TPU interpret mode as `course grade` (the kernel inherits this environment), so both
    # paths give the same score. The hidden checks force it again around every call they make.
    os.environ[MODE_ENV] = GRADING_MODE
