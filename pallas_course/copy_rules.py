"""Explicit copies (LAB·1.6): the rule every kernel that moves its own data must keep, and what the course says
when one does not. One home for the notebook's check (pallas_course.lab_1_6_checks) and the grader's judge
(autograder.judge.copies), so both name a mistake in the same words.

A copy is `pltpu.make_async_copy(src, dst, sem)`: `.start()` issues the DMA, `.wait()` blocks until the DMA has
signalled `sem`. Measured in TPU interpret mode (jax 0.10.2, CPU, 2026-12-06):
* a `.wait()` with no `.start()` before it on that semaphore never returns (the run hangs; a TPU would too);
* a copy started and never waited leaves its destination unwritten (NaN: interpret mode copies on the wait,
  `InterpretParams.dma_execution_mode='on_wait'`);
* a copy out of its ref's bounds raises "Out-of-bounds read" (an IndexError), in the run, not before.

The rule, checked on the traced kernel before anything runs: in each block of code (the kernel body, one branch
of a `pl.when`, one loop body) every `.wait()` follows a `.start()` on the same semaphore in that block, and every
`.start()` is waited in that block. This refuses a copy that starts in one grid step and is waited in the next
(manual cross-step prefetch, as production flash attention does): the course rebuilds and bounds copies that
finish within their block, and says so (ACROSS_BLOCKS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable, Union

WAIT_FIRST = (
    "a copy's .wait() comes before its .start() on that semaphore (or has no .start() in the same block of "
    "the kernel): .wait() blocks until a DMA signals the semaphore and none will, so the kernel hangs, on a TPU "
    "and in interpret mode; call copy.start() first, then copy.wait() on the same semaphore"
)
NEVER_WAITED = (
    "a copy is started and never waited: call copy.wait() on its semaphore before the destination is read and "
    "before the block ends (a buffer read before its copy lands holds stale data on a TPU, NaN in interpret mode)"
)
ACROSS_BLOCKS = (
    "the grader rebuilds copies that start and are waited in the same block of the kernel (the body, one "
    "pl.when branch, one loop body); a copy started in one and waited in another (manual prefetch across grid "
    "steps) is beyond this course"
)
SYNC_COPY = (
    "pltpu.sync_copy allocates its own semaphore inside the kernel (`run_scoped`), which the grader does not "
    "rebuild: write the same copy as pltpu.make_async_copy(src, dst, sem) with sem from "
    "scratch_shapes=[pltpu.SemaphoreType.DMA((n,))], then .start() and .wait()"
)
REGULAR_SEMAPHORES = (
    "regular semaphores (pltpu.SemaphoreType.REGULAR, pl.semaphore_signal / pl.semaphore_wait) are not "
    "rebuilt: nothing proves a signal comes before a wait, and a wait without one never ends; the course's "
    "copies use DMA semaphores (pltpu.SemaphoreType.DMA), signalled by the copy itself"
)
REMOTE = (
    "a remote copy (to another device, with a send semaphore) is not rebuilt: the grade runs and compiles one device"
)


@dataclass(frozen=True)
class Copy:
    """A copy's .start() or .wait() on the semaphore `key` (any value naming one semaphore within its block)."""

    action: str  # "start" or "wait"
    key: Hashable


@dataclass(frozen=True)
class Block:
    """One block of code in order: copies and the blocks nested in it (pl.when branches, loop bodies)."""

    items: tuple[Union[Copy, "Block"], ...] = field(default_factory=tuple)


def problem(block: Block) -> str | None:
    """The first break of the rule in `block` or a block nested in it (WAIT_FIRST, NEVER_WAITED), else None."""
    pending: dict[Hashable, int] = {}
    for item in block.items:
        if isinstance(item, Block):
            inner = problem(item)
            if inner is not None:
                return inner
        elif item.action == "start":
            pending[item.key] = pending.get(item.key, 0) + 1
        elif not pending.get(item.key):
            return WAIT_FIRST
        else:
            pending[item.key] -= 1
    return NEVER_WAITED if any(pending.values()) else None


def copies(block: Block) -> Iterable[Copy]:
    """Every copy action in `block`, nested ones included."""
    for item in block.items:
        if isinstance(item, Block):
            yield from copies(item)
        else:
            yield item
