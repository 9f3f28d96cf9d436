"""The grid as a software pipeline: frames of DMAs, slots and compute, computed from a traced pallas_call.

Vocabulary from docs/pallas/pipelining.md: the *prologue* starts the first copies before any compute, the
*steady state* computes on one slot while the next block streams into the other, the *epilogue* drains the
last write-back. Depth 2 is the TPU default (double buffering); depth 1 is `pl.Buffered(1)`, the pipeline
off: every load and write-back stalls the compute.

Rules the model follows, as the Pallas TPU pipeline does:
* the grid is visited row-major, last axis fastest (checked against TPU interpret mode's grid_point_recorder);
* an input block is copied only when its block index differs from the previous step's (otherwise the copy is
  skipped and the block stays in its slot); each copy of an operand goes to its next slot, round robin;
* an output block stays resident in VMEM while its index does not change (the carried accumulator) and is
  written back once, when the index changes or the grid ends.

No timing is modelled: a frame is one dependency step, and compute "idles" when it has nothing it may work on.
The renderer (schedule_svg) and `course schedule` only read the frames.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Sequence

from .kernel_lines import CodeMap
from .kernel_trace import BlockInfo, PallasCallInfo

Phase = Literal["prologue", "steady", "epilogue"]


@dataclass(frozen=True)
class Transfer:
    """One DMA between HBM and a VMEM slot."""

    kind: Literal["fetch", "writeback"]
    operand: str  # "in[0]", "out[0]"
    block: str  # "A0", "C"
    block_index: tuple[int, ...]
    slot: str  # "a0"
    action: Literal["start", "wait", "start+wait"]  # start+wait: the copy runs and is waited on in this frame
    lines: tuple[int, ...] = ()  # BlockSpec line that decides it


@dataclass(frozen=True)
class Skip:
    """A copy the pipeline does not issue because the block index did not change."""

    operand: str
    block: str
    reason: str


@dataclass(frozen=True)
class Frame:
    """One picture of the pipeline: what moves, what sits in each slot, what compute works on."""

    index: int  # 1-based, as the chapter counts frames
    phase: Phase
    label: str  # "grid step 0", "load 1"
    caption: str  # one sentence for the picture
    grid_point: tuple[int, ...] | None  # the grid step compute works on (None when idle)
    slots: dict[str, str | None]  # slot -> block it holds at the end of the frame (None: empty)
    transfers: tuple[Transfer, ...]
    skipped: tuple[Skip, ...]
    compute: str | None  # expression compute evaluates, None when idle
    idle: bool  # compute has nothing it may work on in this frame
    lines: tuple[int, ...]  # source lines responsible (kernel body lines and BlockSpec lines)


@dataclass(frozen=True)
class Schedule:
    kernel: str
    grid: tuple[int, ...]
    depth: int
    operands: dict[str, str]  # "in[0]" -> "A"
    slot_names: tuple[str, ...]
    frames: tuple[Frame, ...]
    steps: tuple[tuple[int, ...], ...]  # grid visiting order
    source: tuple[str, ...] = ()  # numbered listing the frames' lines refer to (1-based)

    @property
    def idle_frames(self) -> int:
        return sum(f.idle for f in self.frames)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "depth": self.depth,
            "operands": self.operands,
            "slot_names": list(self.slot_names),
            "steps": [list(s) for s in self.steps],
            "num_frames": len(self.frames),
            "idle_frames": self.idle_frames,
            "frames": [asdict(f) for f in self.frames],
            "source": list(self.source),
        }


ExpressionFn = Callable[[tuple[int, ...], Sequence[str], Sequence[str], bool], str]


def _default_names(info: PallasCallInfo) -> list[str]:
    """Operand letters from the kernel's ref names (a_ref -> A); positional letters if unnamed."""
    names: list[str] = []
    invars = getattr(getattr(info.kernel_jaxpr, "debug_info", None), "arg_names", None) or ()
    for i, b in enumerate(info.blocks):
        raw = invars[i] if i < len(invars) else ""
        raw = (raw or "").split("[")[0].removesuffix("_ref") or ("X" if b.role == "in" else "O") + str(b.position)
        names.append(raw.upper())
    return names


def _label(name: str, idx: tuple[int, ...], varying: tuple[int, ...]) -> str:
    if not varying:
        return name
    parts = [idx[d] for d in varying]
    return f"{name}{parts[0]}" if len(parts) == 1 else f"{name}({','.join(map(str, parts))})"


def _default_expression(kernel: str) -> ExpressionFn:
    def expr(point: tuple[int, ...], ins: Sequence[str], outs: Sequence[str], first: bool) -> str:
        args = ", ".join(ins) + ("" if first else ", " + ", ".join(outs))
        return f"{', '.join(outs)} = {kernel}({args})"

    return expr


def schedule(
    info: PallasCallInfo,
    depth: int = 2,
    *,
    names: Sequence[str] | None = None,
    expression: ExpressionFn | None = None,
    code: CodeMap | None = None,
) -> Schedule:
    """Frames of `info`'s pipeline at buffer `depth` (2: double-buffered, 1: pipeline off).

    `names` labels the operands in order (inputs then outputs; default from the ref names), `expression`
    writes the compute of one step (default "C = kernel(A0, B0, C)"), `code` maps frames to source lines.
    """
    if depth not in (1, 2):
        raise NotImplementedError(f"depth={depth}: the model draws 1 (pipeline off) or 2 (double-buffered) buffers")
    blocks: list[BlockInfo] = list(info.blocks)
    names = list(names) if names is not None else _default_names(info)
    if len(names) != len(blocks):
        raise ValueError(f"names={names} has {len(names)} entries but the kernel has {len(blocks)} operands")
    expression = expression or _default_expression(info.name)
    steps = [tuple(p) for p in info.grid_points()]
    keys = [f"{b.role}[{b.position}]" for b in blocks]
    idx = [[b.block_index(*p) for p in steps] for b in blocks]
    labels: list[list[str]] = []
    for b, per_step in zip(blocks, idx):
        varying = tuple(d for d in range(len(b.block_shape)) if len({t[d] for t in per_step}) > 1)
        labels.append([_label(n, t, varying) for n, t in zip([names[len(labels)]] * len(per_step), per_step)])
    ins = [i for i, b in enumerate(blocks) if b.role == "in"]
    outs = [i for i, b in enumerate(blocks) if b.role == "out"]
    spec_lines = [
        (code.in_spec_lines if b.role == "in" else code.out_spec_lines)[b.position : b.position + 1] if code else ()
        for b in blocks
    ]

    def slot_name(i: int, n: int) -> str:
        return names[i].lower() + (str(n) if depth > 1 else "")

    slot_names = tuple(slot_name(i, n) for i in range(len(blocks)) for n in range(depth))
    slots: dict[str, str | None] = {s: None for s in slot_names}
    next_slot = [0] * len(blocks)  # round robin per operand
    cur_slot = [""] * len(blocks)  # slot holding the operand's current block
    # fetch needed at step s for input i: first step, or the block index changed
    need = [[s == 0 or idx[i][s] != idx[i][s - 1] for s in range(len(steps))] for i in range(len(blocks))]
    # output i is written back after step s when its index changes at s + 1 or the grid ends
    flush = [[s == len(steps) - 1 or idx[i][s] != idx[i][s + 1] for s in range(len(steps))] for i in range(len(blocks))]
    first_visit = [[s == 0 or idx[i][s] != idx[i][s - 1] for s in range(len(steps))] for i in range(len(blocks))]
    frames: list[Frame] = []
    # the chapter says "the MXU" for kernels that multiply matrices; other kernels compute on the vector units
    unit = "the MXU" if "dot_general" in info.kernel_primitives() else "the core"

    def fetches(s: int, action: str) -> tuple[list[Transfer], list[Skip]]:
        ts, sk = [], []
        for i in ins:
            if need[i][s]:
                slot = slot_name(i, next_slot[i] % depth)
                next_slot[i] += 1
                cur_slot[i] = slot
                slots[slot] = labels[i][s]
                ts.append(Transfer("fetch", keys[i], labels[i][s], idx[i][s], slot, action, tuple(spec_lines[i])))
            else:
                sk.append(
                    Skip(
                        keys[i],
                        labels[i][s],
                        f"block index {idx[i][s]} unchanged: {labels[i][s]} stays in {cur_slot[i]}",
                    )
                )
        return ts, sk

    def compute(s: int) -> tuple[str, tuple[int, ...]]:
        for i in outs:
            if first_visit[i][s]:
                slot = slot_name(i, next_slot[i] % depth)
                next_slot[i] += 1
                cur_slot[i] = slot
            slots[cur_slot[i]] = labels[i][s]
        first = all(first_visit[i][s] for i in outs)
        text = expression(steps[s], [labels[i][s] for i in ins], [labels[i][s] for i in outs], first)
        lines = code.compute_lines(steps[s]) if code else ()
        return text, lines

    def writebacks(s: int, action: str) -> list[Transfer]:
        return [
            Transfer("writeback", keys[i], labels[i][s], idx[i][s], cur_slot[i], action, tuple(spec_lines[i]))
            for i in outs
            if flush[i][s]
        ]

    def add(phase: Phase, label: str, caption: str, point, transfers, skipped, comp, lines) -> None:
        lines = tuple(sorted(set(lines) | {ln for t in transfers for ln in t.lines}))
        frames.append(
            Frame(
                len(frames) + 1,
                phase,
                label,
                caption,
                point,
                dict(slots),
                tuple(transfers),
                tuple(skipped),
                comp,
                comp is None,
                lines,
            )
        )

    def blocks_text(ts: Sequence[Transfer]) -> str:
        return ", ".join(t.block for t in ts)

    if depth == 2:
        ts, sk = fetches(0, "start")
        add(
            "prologue",
            "grid step 0",
            f"DMA {blocks_text(ts)} into the first slot {'pair' if len(ts) == 2 else 'set'}; "
            f"{unit} has no data yet and waits",
            None,
            ts,
            sk,
            None,
            (),
        )
        last = len(steps) - 1
        for s in range(len(steps)):
            waited = [
                Transfer(t.kind, t.operand, t.block, t.block_index, t.slot, "wait", t.lines)
                for t in frames[-1].transfers
                if t.kind == "fetch" and t.action == "start"
            ]
            comp, lines = compute(s)
            ts, sk = fetches(s + 1, "start") if s < last else ([], [])
            # an output block finished at step s - 1 is written back while step s computes into the other slot
            wbs = writebacks(s - 1, "start") if s > 0 else []
            parts = [f"compute {comp}"]
            if ts:
                parts.append(f"while {blocks_text(ts)} stream into {', '.join(t.slot for t in ts)}")
            if wbs:
                parts.append(f"while {blocks_text(wbs)} is written back")
            if sk:
                parts.append(f"no copy for {', '.join(x.block for x in sk)} (index unchanged)")
            add(
                "epilogue" if s == last else "steady",
                f"grid step {s}",
                "; ".join(parts),
                steps[s],
                waited + ts + wbs,
                sk,
                comp,
                lines,
            )
        final = writebacks(len(steps) - 1, "start+wait")
        add(
            "epilogue",
            f"grid step {len(steps) - 1} done",
            f"write back {blocks_text(final)} to HBM; {unit} has nothing left and waits",
            None,
            final,
            [],
            None,
            (),
        )
    else:
        load = 0
        for s in range(len(steps)):
            ts, sk = fetches(s, "start+wait")
            if ts:
                load += 1
                add(
                    "steady" if s else "prologue",
                    f"load {load}",
                    f"DMA {blocks_text(ts)} into VMEM; {unit} sits idle the whole transfer",
                    None,
                    ts,
                    sk,
                    None,
                    (),
                )
                sk = []
            comp, lines = compute(s)
            add("steady", f"grid step {s}", f"compute {comp}; no copy runs alongside", steps[s], [], sk, comp, lines)
            wbs = writebacks(s, "start+wait")
            if wbs:
                add(
                    "epilogue" if s == len(steps) - 1 else "steady",
                    f"write back {blocks_text(wbs)}",
                    f"write back {blocks_text(wbs)} to HBM; {unit} sits idle",
                    None,
                    wbs,
                    [],
                    None,
                    (),
                )
    return Schedule(
        info.name,
        info.grid,
        depth,
        dict(zip(keys, names)),
        slot_names,
        tuple(frames),
        tuple(steps),
        code.lines if code else (),
    )


def coverage_gaps(info: PallasCallInfo) -> list[str]:
    """Operands whose blocks, over the whole grid, do not cover the array (e.g. k=500 with bk=128: K // bk drops
    the tail). Each gap in plain words; empty when every element is visited."""
    gaps = []
    points = list(info.grid_points())
    for b in info.blocks:
        dims = [1 if s is None else s for s in b.block_shape]
        seen = [max(b.block_index(*p)[d] for p in points) + 1 if points else 0 for d in range(len(dims))]
        for d, (n, size, count) in enumerate(zip(b.array_shape, dims, seen)):
            if count * size < n:
                gaps.append(f"{b.role}[{b.position}] dim {d}: {count} block(s) of {size} cover {count * size} of {n}")
    return gaps


def blocks_by_operand(s: "Schedule") -> dict[str, list[str]]:
    """Every block each operand moves, in first-seen order (the HBM row of a schedule picture)."""
    out: dict[str, list[str]] = {name: [] for name in s.operands.values()}
    for f in s.frames:
        for t in f.transfers:
            row = out[s.operands[t.operand]]
            if t.block not in row:
                row.append(t.block)
    return out


def _matmul_expression(point: tuple[int, ...], ins: Sequence[str], outs: Sequence[str], first: bool) -> str:
    # first visit of the output block is the k == 0 step: _init zeroes it, then the dot accumulates
    (a, b), (c,) = ins, outs
    return f"{c} = 0; {c} += {a}·{b}" if first else f"{c} += {a}·{b}"


# How the chapter names each kernel's operands in pictures (inputs then outputs) and writes its compute.
DISPLAY: dict[str, tuple[tuple[str, ...], Callable | None]] = {
    "matmul": (("A", "B", "C"), _matmul_expression),
    "transpose": (("X", "O"), None),
    "softmax": (("X", "O"), None),
    "layernorm": (("X", "G", "B", "O"), None),
}
