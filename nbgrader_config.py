# nbgrader reads this file from the directory it runs in. Everything comes from course.yml.
from autograder.doors.nbgrader_setup import configure

configure(get_config())  # noqa: F821 - get_config is injected by traitlets
