"""A stand-in of Colab's TPU image (compat/check_colab.sh drives it): every released notebook, filled in from the
solutions, runs clean there, and every solution kernel compiles with the libtpu its set-up cell leaves installed.

  python compat/colab_standin.py prepare DIR     on this machine (the course's venv): build the release into
                                                 DIR/release and write DIR/filled/*.ipynb: each released lab with
                                                 its solutions filled in, COURSE_PIP pointed at the release's wheel
                                                 (a file path inside the root), and a last cell that compiles the
                                                 lab's solution kernels (course_tools.compile_cases) for v5e, v6e
  python compat/colab_standin.py run NOTEBOOK    inside the root, in the Colab venv: execute it as Colab would
                                                 (nbclient, a kernel with google.colab imported); writes NOTEBOOK's
                                                 result next to it (.json)
  python compat/colab_standin.py record DIR      on this machine: compat/colab.json from the results
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD = REPO / "compat" / "colab.json"
IMAGE = REPO / "compat" / "colab-tpu.txt"
MARK = "COLAB-STANDIN "
CHIPS = ("v5e", "v6e")
# Where DIR appears inside the root (check_colab.sh copies it there).
IN_ROOT = "/colab"

COMPILE_CELL = '''# The stand-in's own check (not part of the lab): compile this lab's solution kernels with the libtpu the
# set-up cell left installed, for {chips}, and report the versions this session ended with.
import json as _json
from importlib import metadata as _metadata
import jax as _jax
from pallas_course import tpu_compile as _tc
_rows = []
for _kernel, _args, _kwargs in {cases!r}:
    _structs = [_jax.ShapeDtypeStruct(tuple(_s), _jax.numpy.dtype(_d)) for _s, _d in _args]
    for _chip in {chips!r}:
        _r = _tc.compile_for(lambda *_a, _f=globals()[_kernel], _k=_kwargs: _f(*_a, **_k), *_structs, chip=_chip)
        _rows.append({{"kernel": _kernel, "args": ", ".join(f"{{_d}}{{list(_s)}}" for _s, _d in _args),
                       "kwargs": _kwargs, "chip": _chip, "ok": _r.ok,
                       "skipped": _r.skipped, "message": _r.message, "seconds": round(_r.seconds, 2)}})
_versions = {{}}
for _name in ("jax", "jaxlib", "libtpu", "numpy", "ipykernel", "nbformat", "pydantic", "PyYAML", "pallas-from-zero"):
    try:
        _versions[_name] = _metadata.version(_name)
    except _metadata.PackageNotFoundError:
        _versions[_name] = None
print({mark!r} + _json.dumps({{"versions": _versions, "backend": _jax.default_backend(), "compiles": _rows}}))
'''


def prepare(out: Path) -> None:
    import nbformat

    from course_tools.compile_cases import CASES
    from course_tools.demo import filled_in
    from course_tools.release import build_release
    from autograder.course_manifest import manifest

    release = build_release(manifest().stage.id, out / "release")
    wheel = f"{IN_ROOT}/release/wheels/{release.wheel.name}"
    (out / "filled").mkdir(parents=True, exist_ok=True)
    for lab in manifest().labs:
        released = nbformat.read(out / "release" / "labs" / Path(lab.notebook).name, as_version=4)
        nb = filled_in(lab.id, student=released)
        (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        lines = params.source.split("\n")
        i = next(i for i, l in enumerate(lines) if l.startswith("COURSE_PIP ="))
        spec = json.loads(lines[i].split("=", 1)[1].split("  #")[0].strip())
        assert spec.startswith("pallas-from-zero") and " @ https://" in spec, spec
        lines[i] = f"COURSE_PIP = {json.dumps(spec.split(' @ ')[0] + ' @ file://' + wheel)}"
        params.source = "\n".join(lines)
        if lab.id in CASES:
            nb.cells.append(
                nbformat.v4.new_code_cell(
                    COMPILE_CELL.format(
                        chips=CHIPS,
                        cases=[(k, [[list(s), d] for s, d in a], kw) for k, a, kw in CASES[lab.id]],
                        mark=MARK,
                    )
                )
            )
        nbformat.write(nb, out / "filled" / Path(lab.notebook).name)
    print(f"prepared {out}: release {release.wheel.name}, {len(manifest().labs)} filled notebooks")


def run(path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    error = None
    try:
        NotebookClient(
            nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    except CellExecutionError as e:
        error = " ".join(str(e).strip().splitlines()[-1:])[:600]
    except Exception as e:  # noqa: BLE001 - the kernel died, a timeout: recorded, the next notebook goes on
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:600] if str(e).strip() else ''}"
    seconds = round(time.perf_counter() - t0, 1)
    report = None
    setup_lines: list[str] = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            text = o.get("text", "") if o.get("output_type") == "stream" else ""
            for line in text.splitlines():
                if line.startswith(MARK):
                    report = json.loads(line[len(MARK) :])
                elif line.startswith("Pallas from Zero ·"):
                    setup_lines.append(line)
    errors = [
        f"cell {i}: {o.get('ename')}: {str(o.get('evalue'))[:300]}"
        for i, c in enumerate(nb.cells)
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    result = {
        "notebook": path.name,
        "ok": error is None and not errors,
        "seconds": seconds,
        "error": error,
        "errors": errors,
        "setup_says": setup_lines[:1],
        **(report or {"versions": None, "compiles": None}),
    }
    path.with_suffix(".json").write_text(json.dumps(result, indent=1))
    print(
        f"{'ok ' if result['ok'] else 'FAIL'} {path.name} ({seconds} s){'' if result['ok'] else ': ' + str(error or errors)}"
    )


def record(out: Path) -> int:
    from course_tools.bench.common import machine

    results = [json.loads(p.read_text()) for p in sorted((out / "filled").glob("*.json"))]
    compiles = [r for res in results for r in (res.get("compiles") or [])]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", ":!compat/colab.json"], cwd=REPO, capture_output=True, text=True
    ).stdout.splitlines()
    python = (out / "python-version").read_text().strip() if (out / "python-version").exists() else None
    data = {
        "what": (
            "a stand-in of Colab's TPU image on a CPU machine: every released notebook, filled in from the "
            "solutions, run from its set-up cell (which installs the course's jax and the release's wheel) to "
            "its last cell; then every solution kernel compiled (deviceless) with the libtpu the set-up left"
        ),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "uncommitted": dirty,
        "image": {
            "python": python,
            "packages": [l for l in IMAGE.read_text().splitlines() if l and l[0] != "#"],
            "source": " ".join(l.lstrip("# ") for l in IMAGE.read_text().splitlines()[:2]),
            "google.colab": "a stand-in module, imported at kernel start (IPython startup file)",
            "accelerator": "none: the stand-in runs on this CPU; kernels run in TPU interpret mode",
        },
        "machine": machine(),
        "decision": "the set-up cell installs jax[tpu]==<course pin> (jax==<pin> without libtpu) before jax is imported",
        "notebooks": [
            {k: r[k] for k in ("notebook", "ok", "seconds", "error", "errors", "setup_says", "versions")}
            for r in results
        ],
        "compiles": compiles,
        "all_ok": bool(results) and all(r["ok"] for r in results) and bool(compiles) and all(c["ok"] for c in compiles),
    }
    RECORD.write_text(json.dumps(data, indent=1) + "\n")
    print(
        f"wrote {RECORD.relative_to(REPO)}: notebooks {sum(r['ok'] for r in results)}/{len(results)} clean, "
        f"compiles {sum(c['ok'] for c in compiles)}/{len(compiles)}"
    )
    return 0 if data["all_ok"] else 1


if __name__ == "__main__":
    cmd, arg = sys.argv[1], Path(sys.argv[2])
    if cmd == "prepare":
        prepare(arg)
    elif cmd == "run":
        run(arg)
    elif cmd == "record":
        sys.exit(record(arg))
    else:
        sys.exit(f"usage: {sys.argv[0]} prepare|run|record PATH")
