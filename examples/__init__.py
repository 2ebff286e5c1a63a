"""Example applications rebuilt on durq; each has a README and an end-to-end test."""

from __future__ import annotations

import shutil
from pathlib import Path

_MARKER = ".durq-demo"


def fresh_demo_dir(path: str | Path) -> Path:
    """Empty ``path`` for a demo run: a demo shows its scenario from the start each time.

    Only a directory under ``.demo/`` (the demos' own area, which ``make clean-demo``
    removes) or one an earlier demo made (it holds the marker file ``.durq-demo``) is
    emptied; any other directory that holds anything is refused with SystemExit, so a
    mistyped ``--data-dir`` never deletes someone's files.
    """
    data = Path(path)
    if data.exists():
        if (data / _MARKER).exists() or data.resolve().parent.name == ".demo":
            shutil.rmtree(data)
        elif any(data.iterdir()):
            raise SystemExit(f"{data} holds files that no demo made; give an empty --data-dir")
    data.mkdir(parents=True, exist_ok=True)
    (data / _MARKER).touch()
    return data
