"""Put the instructor's cells back into a submission before it runs, as nbgrader's OverwriteCells does.

Locked cells (set-up, hidden tests) come back from the source notebook whatever the student did to them;
deleted graded cells are re-inserted after the cell that preceded them in the source (nbgrader re-adds
graded cells only, so a deleted set-up cell stays deleted here too). So a notebook can
neither edit nor delete its hidden tests, and `course grade` runs exactly the cells nbgrader runs.
"""

from __future__ import annotations

import copy

from nbformat import NotebookNode

from autograder.cells import checksum, grade_id, has_grade_id, is_grade, is_locked, is_solution, meta, set_meta


def deduplicate(nb: NotebookNode) -> list[str]:
    """nbgrader's DeduplicateIds (its autograde runs it first): of the graded, answer or locked cells that share
    a grade id, the last keeps it and the others lose their nbgrader metadata (they run, ungraded). The
    metadata goes whole (nbgrader leaves `{}`, on which its own OverwriteCells then fails)."""
    seen: set[str] = set()
    notes = []
    for cell in reversed(nb.cells):
        if not (is_grade(cell) or is_solution(cell) or is_locked(cell)) or grade_id(cell) is None:
            continue
        gid = grade_id(cell)
        if gid in seen:
            set_meta(cell, None)
            notes.append(f"cell {gid!r} appears more than once; only its last copy is graded")
        seen.add(gid)
    return notes[::-1]


def restore(submission: NotebookNode, source: NotebookNode, release: NotebookNode | None = None) -> list[str]:
    """Overwrite locked cells and re-add missing graded cells in `submission` (in place); returns notes.

    `release` (the student notebook as handed out) lets the notes stay quiet about cells the student
    never touched: their hidden tests were stripped on release, restoring them is routine.
    """
    notes: list[str] = []
    source_cells = {grade_id(c): c for c in source.cells if grade_id(c)}
    released = {grade_id(c): c.source for c in release.cells if grade_id(c)} if release else {}
    # nbgrader sets every graded cell's checksum to the released one ("always update the checksum"), which
    # is how an unanswered written answer scores 0 and an answered one waits for manual grading.
    checksums = {grade_id(c): checksum(c) for c in release.cells if grade_id(c)} if release else {}
    release_cells = {grade_id(c): c for c in release.cells if grade_id(c)} if release else {}
    order = [grade_id(c) for c in source.cells if grade_id(c)]

    notes += deduplicate(submission)
    for cell in submission.cells:
        if not has_grade_id(cell):
            continue
        gid = grade_id(cell)
        src = source_cells.get(gid) if gid is not None else None
        if src is None:
            # nbgrader drops grade ids it does not know: such a cell is not graded. The metadata goes whole
            # (nbgrader leaves the rest, a grade cell without an id, on which its own OverwriteCells fails)
            notes.append(f"cell {meta(cell)['grade_id']!r} is not part of this lab; it runs but is not graded")
            set_meta(cell, None)
            continue
        if cell.cell_type != src.cell_type or is_locked(src) and cell.source != src.source:
            if released.get(gid) != cell.source:
                notes.append(f"cell {gid!r} was changed; the original was restored")
            fresh = copy.deepcopy(src)
            cell.clear()
            cell.update(fresh)
        else:
            set_meta(cell, meta(src))
            # tags too (e.g. a student's `skip-execution` on a test cell): a graded cell is the instructor's
            cell.metadata["tags"] = list(src.get("metadata", {}).get("tags", []))
            if not cell.metadata["tags"]:
                del cell.metadata["tags"]
        if checksums.get(gid):
            set_meta(cell, {**meta(cell), "checksum": checksums[gid]})

    present = {grade_id(c) for c in submission.cells if grade_id(c)}
    for pos, gid in enumerate(order):
        src = source_cells[gid]
        if gid in present or not is_grade(src):  # like nbgrader: graded cells only
            continue
        notes.append(f"cell {gid!r} was missing; it was added back")
        before = next((g for g in reversed(order[:pos]) if g in present), None)
        index = 0 if before is None else 1 + next(i for i, c in enumerate(submission.cells) if grade_id(c) == before)
        # A deleted answer comes back as handed out (nbgrader re-adds the gradebook's copy, the stub):
        # the source's copy holds the model answer, which must not reach the student's notebook.
        fresh = copy.deepcopy(release_cells[gid] if is_solution(src) and gid in release_cells else src)
        set_meta(fresh, {**meta(src), **({"checksum": checksums[gid]} if checksums.get(gid) else {})})
        submission.cells.insert(index, fresh)
        present.add(gid)

    for cell in submission.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return notes
