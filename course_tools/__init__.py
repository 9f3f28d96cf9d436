"""Pallas from Zero's instructor tools: the `course` command, the site builder, bench, gates and release.
Never shipped to students. Imports point one way: course_tools -> autograder -> pallas_course."""
