"""Where a notebook run keeps its files: ``build/notebooks/<name>/`` of the checkout.

The shipped notebooks write session files and caches there instead of a fresh
``/tmp/pi_nb_*`` folder per run (which nothing ever removes): one folder per notebook,
emptied at the start of each run, inside the ``build/`` folder git already ignores.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["run_folder"]


def project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working folder) holding a
    ``pyproject.toml`` — the checkout, whether a notebook runs in ``notebooks/`` (nbval,
    ``nbconvert --execute``) or at the root; ``start`` itself when there is none."""
    here = (start or Path.cwd()).resolve()
    return next((p for p in (here, *here.parents) if (p / "pyproject.toml").is_file()), here)


def run_folder(name: str, start: Path | None = None, clean: bool = True) -> Path:
    """``<project root>/build/notebooks/<name>/``, created and (``clean``) emptied first."""
    if not name or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"run_folder: {name!r} must be a plain folder name")
    folder = project_root(start) / "build" / "notebooks" / name
    if clean and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
