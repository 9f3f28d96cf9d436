"""LAB·1.4's schedule cell imports DISPLAY from here. The kernels moved to course_tools (never shipped);
DISPLAY lives in pallas_course.schedule. Delete this file once that cell imports it from there."""
from pallas_course.schedule import DISPLAY

__all__ = ["DISPLAY"]
