"""The commands: ``labkit sweep``, ``labkit regress compare|baseline``, ``labkit doctor``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from labkit.i18n import t
from labkit.regress import messages  # noqa: F401  (registers the regress.* messages)


def cmd_baseline(args: argparse.Namespace) -> int:
    """Copy a sweep's records (not its notebooks) into a baseline folder, as committed: the values
    never compared (process ids, temporary folders) are left out."""
    from labkit.regress.compare import without_volatile
    from labkit.regress.sweep import RECORD_SUFFIX

    src, dst = Path(args.run), Path(args.out)
    files = sorted(src.rglob(f"*{RECORD_SUFFIX}"))
    if not files:
        print(t("regress.compare.no_records", path=str(src)), file=sys.stderr)
        return 2
    for f in files:
        target = dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        rec = json.loads(f.read_text())
        for run in rec.get("runs", []):
            run["record"]["values"] = without_volatile(run["record"].get("values") or {})
        target.write_text(json.dumps(rec, indent=1) + "\n")
    print(t("regress.baseline.done", n=len(files), out=str(dst)))
    return 0


def register(sub: Any) -> None:
    from labkit.regress import doctor, report, sweep

    p = sub.add_parser("sweep", help=t("regress.sweep.help"))
    sweep.add_arguments(p)
    p.set_defaults(func=sweep.cmd_sweep)

    p = sub.add_parser("regress", help=t("regress.help"))
    inner = p.add_subparsers(dest="regress_command", required=True)
    c = inner.add_parser("compare", help=t("regress.compare.help"))
    report.add_arguments(c)
    c.set_defaults(func=report.cmd_compare)
    b = inner.add_parser("baseline", help=t("regress.baseline.help"))
    b.add_argument("run", help=t("regress.baseline.help.run"))
    b.add_argument("--out", required=True, help=t("regress.baseline.help.out"))
    b.set_defaults(func=cmd_baseline)

    p = sub.add_parser("doctor", help=t("regress.doctor.help"))
    doctor.add_arguments(p)
    p.set_defaults(func=doctor.cmd_doctor)
