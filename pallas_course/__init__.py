"""Pallas from Zero: the helpers that notebooks, the grader and the `course` command share.

Public face. The lab notebooks import these 18 modules by path, so their paths and the names the notebooks take
from them are frozen (move one only behind a facade left at the old path): check (check, failure_text, LAB·1.4's
check_* functions), lab_checks, runtime, chips, bench, schedule, schedule_svg, legality, lab_1_3_rules,
lab_1_4_demos, kernel_trace, kernel_lines, trace_svg, tensorcore_svg, tpu_compile, cost_model, manifest,
tokamax_reading. The grader's jail agent also imports check and runtime by name. The other modules are internal
to the course (the grader and the tools import them as well).

Layers. A module imports only modules of its own layer or a lower one, function-level imports included, and no
import cycle exists anywhere; the course's import-graph test holds the table (PALLAS_COURSE_LAYERS):
  0 facts and formats (rules, errors, kernel_trace, manifest, pyparse, ...);
  1 models of the TPU, the compiler and the comparison (chips, legality, cost_model, tpu_compile, compare, ...);
  2 the labs' rules and cases, shared with the grader (lab_1_3_rules, lab_1_4_rules, walks);
  3 what notebook cells call, and the figures (check, lab_checks, lab_1_4_checks, runtime, *_svg, ...).
So a check stands on `compare`, never on `check`: check is the notebooks' facade, and the package's own modules
and the grader import each name from the module that defines it.
"""

__version__ = "0.1.0"
