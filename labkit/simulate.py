"""A recorded step replayed on a link it did not run on: ``labkit.timing.simulate`` (with the links of
``labkit.timing.links`` and the profile of ``labkit.timing.calibrate``), under the name a notebook
types. Formulas only: importing it imports no torch.

    from labkit import simulate
    profile = simulate.profile_from_run(run)
    print(simulate.table(simulate.sweep(profile, links=["nvlink4", "ib100"])))
"""

from __future__ import annotations

from labkit.timing.simulate import (
    LINKS,
    PREFETCH,
    Link,
    Profile,
    Result,
    compare_to_measured,
    fit_link,
    link,
    profile_from_run,
    simulate,
    sweep,
    table,
)

__all__ = [
    "LINKS", "PREFETCH", "Link", "Profile", "Result", "compare_to_measured", "fit_link", "link",
    "profile_from_run", "simulate", "sweep", "table",
]  # fmt: skip
