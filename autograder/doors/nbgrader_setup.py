"""nbgrader's configuration, derived from course.yml (nbgrader_config.py at the root calls `configure`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbgrader.plugins.export import CsvExportPlugin

from autograder.jail.limits import CELL_TIMEOUT_S
from autograder.course_manifest import REPO_ROOT, manifest

# What nbgrader puts where a solution region was. A clear error beats a silent `pass`.
CODE_STUB = '# YOUR CODE HERE\nraise NotImplementedError("not written yet: replace this line with your code")'
TEXT_STUB = "YOUR ANSWER HERE"
# Where `nbgrader export` writes without --to, under the course root: beside `course grade`'s reports, in a folder
# git ignores (nbgrader's own default, ./grades.csv, leaves the class's grades as an untracked file in the root).
EXPORT_CSV = Path("grades") / "grades.csv"


class GradesCsvExport(CsvExportPlugin):
    """nbgrader's CSV export, to <course root>/grades/grades.csv by default; the file's folder is created."""

    def export(self, gradebook: Any) -> None:
        if not self.to:
            self.to = str(Path(self.parent.coursedir.root) / EXPORT_CSV)
        Path(self.to).parent.mkdir(parents=True, exist_ok=True)
        super().export(gradebook)


def configure(c: Any) -> None:
    m = manifest()
    c.CourseDirectory.course_id = m.course.id
    c.CourseDirectory.root = str(REPO_ROOT)
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "labs"
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = TEXT_STUB
    c.OverwriteCells.add_missing_cells = True  # a deleted hidden-test cell comes back and runs
    # Autograde runs through the course's engine, as `course grade` does (autograder/doors/nbgrader_engine.py): the
    # notebook's cells in a jail, its hidden tests outside it. Execute is replaced; nbgrader's other steps stay.
    from nbgrader.converters.autograde import Autograde

    steps: list[Any] = Autograde.class_traits()["autograde_preprocessors"].default()
    steps[steps.index(next(p for p in steps if p.__name__ == "Execute"))] = (
        "autograder.doors.nbgrader_engine.JailedExecute"
    )
    c.Autograde.autograde_preprocessors = steps
    # nbgrader reads each submission through the pipeline (identify, restore) from the bytes the pre-convert
    # hook read, after refusing links and special files as `course grade` does (autograder.doors.nbgrader_engine).
    from autograder.doors.nbgrader_engine import read_submissions

    c.Autograde.pre_convert_hook = read_submissions
    c.Autograde.exporter_class = "autograder.doors.nbgrader_engine.SubmittedNotebook"
    c.JailedExecute.timeout = CELL_TIMEOUT_S
    # generate_feedback renders the autograded notebook, whose test cells hold the hidden tests nbgrader restored:
    # clear them first, as generate_assignment does (tests/test_solutions_both_doors.py),
    from nbgrader.converters.generate_feedback import GenerateFeedback

    feedback: list[Any] = list(GenerateFeedback.class_traits()["preprocessors"].default())
    feedback.insert(1, "nbgrader.preprocessors.ClearHiddenTests")
    # and the outputs of the cells run after the first hidden test, as `course grade`'s executed/ copy drops them
    feedback.insert(2, "autograder.doors.nbgrader_engine.DropOutputsAfterTests")
    c.GenerateFeedback.preprocessors = feedback
    c.ExportApp.plugin_class = GradesCsvExport
