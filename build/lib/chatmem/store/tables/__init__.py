"""Table modules, one per area (``accounts``, ``conversations``, ``profiles``, ``runs`` …).

:func:`load_all` imports every module here so ``Base.metadata`` knows every table (for
tools that compare the models with the migrated schema).
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
