"""What the library defines, found by walking it, for tests parametrised over every loss or every public estimator.

Importing every module of :mod:`rffor` and then listing the subclasses of a base class finds a new loss or estimator
wherever it is defined (``rffor/losses.py``, ``rffor/solvers/noncrossing.py``, a future module) with no edit of the
tests: the tests that iterate over these lists pick it up, and each test module has one test that fails until the
newcomer has example parameters there.
"""

from __future__ import annotations

import importlib
import pkgutil

import rffor


def library_modules() -> list:
    """Every module of :mod:`rffor`, imported (``__main__`` excepted: importing it is harmless but pointless)."""
    names = [m.name for m in pkgutil.walk_packages(rffor.__path__, "rffor.") if not m.name.endswith(".__main__")]
    return [importlib.import_module(name) for name in sorted(names)]


def library_subclasses(base: type) -> list[type]:
    """The subclasses of ``base`` (at any depth, ``base`` excluded) defined in a module of :mod:`rffor`, sorted by
    module and name. Subclasses defined by tests (``tests/``) are left out."""
    library_modules()
    found: set[type] = set()
    todo = [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted((c for c in found if c.__module__.startswith("rffor.")), key=lambda c: (c.__module__, c.__qualname__))


def public_classes(base: type) -> list[type]:
    """The classes named in the ``__all__`` of a module of :mod:`rffor` that subclass ``base``, sorted by name."""
    found = {
        obj
        for module in [rffor, *library_modules()]
        for name in getattr(module, "__all__", ())
        if isinstance(obj := getattr(module, name, None), type) and issubclass(obj, base)
    }
    return sorted(found, key=lambda c: (c.__name__, c.__module__))
