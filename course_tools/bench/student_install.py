"""How heavy the student install is: `course release` built here, then a fresh virtualenv with the release's
requirements.txt, timed and weighed. Writes (appends one labelled record to) bench/student-install.json.

    python -m course_tools.bench.student_install --label after

The install is what a student runs (`pip install -r requirements.txt` in the release's folder), from this
machine's package sources (pip's configured index and wheelhouse: no network download is timed, so the seconds
are unpacking and byte-compiling, not a download). Sizes are the venv on disk (du), largest packages first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_tools.bench.common import machine
from course_tools.bench_records import provenance

OUT = Path("bench/student-install.json")


def _du_mib(path: Path) -> float:
    run = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(run.stdout.split()[0]) / 1024


def _largest(site: Path, n: int = 12) -> list[dict[str, object]]:
    sizes = [(p.name, _du_mib(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return [{"name": name, "mib": round(mib, 1)} for name, mib in sorted(sizes, key=lambda s: -s[1])[:n]]


def measure(label: str, release: Path | None = None, extra_pip: list[str] | None = None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="pfz-install-") as tmp:
        tmp_path = Path(tmp)
        if release is None:
            release = tmp_path / "release"
            from course_tools.release import build_release

            build_release("stage-1", release)
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-cache-dir",
            "-r",
            "requirements.txt",
            *(extra_pip or []),
        ]
        cpu0 = os.times()
        t0 = time.perf_counter()
        run = subprocess.run(pip, cwd=release, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        cpu1 = os.times()
        if run.returncode != 0:
            raise RuntimeError(f"the student install failed:\n{run.stderr[-3000:]}")
        site = next((venv / "lib").glob("python*/site-packages"))
        freeze = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True, check=True
        ).stdout.split()
        return {
            "label": label,
            "what": "a fresh venv, `pip install --no-cache-dir -r requirements.txt` in the release built by "
            "`course release stage-1` at this commit" + (f", plus {extra_pip}" if extra_pip else ""),
            "requirements": (release / "requirements.txt").read_text().splitlines(),
            "venv_mib": round(_du_mib(venv), 1),
            "install_seconds_wall": round(seconds, 1),
            "install_seconds_cpu_children": round(
                (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system), 1
            ),
            "packages": len(freeze),
            "libtpu": any(l.lower().startswith("libtpu") for l in freeze),
            "tokamax": any(l.lower().startswith("tokamax") for l in freeze),
            "largest": _largest(site),
            "provenance": {
                **provenance().model_dump(mode="json"),
                **machine(),
                "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
                "package_source": "pip's configured index and wheelhouse on this machine (local files)",
                "python": sys.version.split()[0],
            },
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.bench.student_install", description=__doc__)
    parser.add_argument("--label", required=True)
    parser.add_argument("--release", type=Path, help="an existing release folder (default: build one)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    record = measure(args.label, args.release)
    records = json.loads(args.out.read_text()) if args.out.exists() else []
    records = [r for r in records if r.get("label") != args.label] + [record]
    args.out.write_text(json.dumps(records, indent=1) + "\n")
    print(
        json.dumps(
            {k: record[k] for k in ("label", "venv_mib", "install_seconds_wall", "packages", "libtpu", "tokamax")}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
