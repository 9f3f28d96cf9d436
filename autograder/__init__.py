"""The grader: hidden checks per lab, the notebook runner, scoring, reports and nbgrader glue."""
