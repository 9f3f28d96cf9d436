"""The engines a notebook's cells can run on, by name (papermill-style): one place decides how a grading
executes, instead of a flag and a hook threaded through the steps.

    "jail"     the cells in a fresh jail, the hidden tests outside it (autograder.steps.execute.execute)
    "no-jail"  the same without the jail (`course grade --no-jail`: student code runs with your rights)

Tests register their own stand-in (`register("fake", ...)`). An engine is `(notebook, lab, limits) ->
Execution`: it runs the notebook it is given (a copy: it fills in outputs in place) and never raises for
what the notebook does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from autograder.steps.execute import Execution
    from autograder.jail.limits import Limits
    from autograder.course_manifest import LabSpec

Engine = Callable[["NotebookNode", "LabSpec", "Limits"], "Execution"]
JAIL, NO_JAIL = "jail", "no-jail"


def _jail(nb: NotebookNode, lab: LabSpec, limits: Limits) -> Execution:
    from autograder.steps import execute as engine

    return engine.execute(nb, lab, limits=limits, cell_timeout_s=limits.cell_timeout_s, jailed=True)


def _no_jail(nb: NotebookNode, lab: LabSpec, limits: Limits) -> Execution:
    from autograder.steps import execute as engine

    return engine.execute(nb, lab, limits=limits, cell_timeout_s=limits.cell_timeout_s, jailed=False)


ENGINES: dict[str, Engine] = {JAIL: _jail, NO_JAIL: _no_jail}


def register(name: str, engine: Engine) -> None:
    ENGINES[name] = engine


def get(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"no engine {name!r}; the engines are {', '.join(ENGINES)}") from None


def is_jailed(name: str) -> bool:
    """Whether student code runs in a jail under this engine (all but "no-jail": a stand-in runs none)."""
    return name != NO_JAIL
