#!/usr/bin/env bash
# Pallas from Zero's PrairieLearn external grader (built by `course autograder prairielearn`): the question's
# entrypoint, `run.sh LAB`. It grades the notebook in /grade/student and writes /grade/results/results.json,
# always. In the course's image it runs /opt/course-env's Python; elsewhere, the Python of `course` on PATH.
#   PL_GRADE_ROOT   the root instead of /grade (tests)
LAB="${1:-@LAB@}"
GRADE="${PL_GRADE_ROOT:-/grade}"
HERE="$(cd "$(dirname "$0")" && pwd)"
RESULTS="$GRADE/results/results.json"
mkdir -p "$GRADE/results"
# PrairieLearn copies the grader's files in readable by all: none of them for the jail's uid, but what a jail
# reads through binds of the tree (bubblewrap's uid 65534: the agent and the student helpers, not the copy of
# the instructor's course.yml among them); setup.sh does the same on Gradescope
chmod -R o= "$GRADE/serverFilesCourse" "$GRADE/tests" "$GRADE/data" "$GRADE/results" 2>/dev/null || true
for rel in @JAIL_READS@; do chmod -R o+rX "$HERE/course/$rel" 2>/dev/null || true; done
for rel in @JAIL_HIDDEN@; do chmod o= "$HERE/course/$rel" 2>/dev/null || true; done
PY=/opt/course-env/bin/python
if [ ! -x "$PY" ]; then
  COURSE="$(command -v course || true)"
  PY="$( [ -n "$COURSE" ] && head -n 1 "$COURSE" | sed -e 's/^#!//' -e 's/ .*//')"
fi
# -P: the grader's modules come from PYTHONPATH alone, never from the working folder
cd "$GRADE" || exit 1
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PL_GRADE_ROOT="$GRADE" \
    ${COURSE_JAIL:+COURSE_JAIL="$COURSE_JAIL"} PYTHONPATH="$HERE/course" \
    "$PY" -P -m autograder.doors.prairielearn --lab "$LAB"
if ! "${PY:-python3}" -c 'import json, sys; json.load(open(sys.argv[1]))' "$RESULTS" 2>/dev/null; then
  printf '%s\n' '{"gradable": false, "format_errors": ["the autograder failed before writing its results"], "message": "Not graded: the autograder failed; no attempt was used. Tell your instructor."}' > "$RESULTS"
fi
exit 0
