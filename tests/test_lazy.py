"""Importing rope_lib is cheap: sympy, matplotlib and mpmath load only when first used.

Measured in a fresh interpreter (a subprocess), by what is in ``sys.modules`` after the
import, not by a timing: the heavy modules must be absent.
"""

from __future__ import annotations

import json
import subprocess
import sys

from rope_lib._lazy import lazy_import

HEAVY = ("sympy", "matplotlib", "mpmath", "PIL")


def _modules_after(code: str) -> set[str]:
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out.splitlines()[-1])}


def test_import_rope_lib_loads_no_heavy_module() -> None:
    loaded = _modules_after("import rope_lib")
    assert not loaded & set(HEAVY), f"import rope_lib loaded {sorted(loaded & set(HEAVY))}"


def test_heavy_modules_load_when_a_symbolic_or_plotting_function_is_called() -> None:
    # The positive control: the same probe sees sympy and matplotlib once they are used.
    loaded = _modules_after(
        "import rope_lib\nrope_lib.symbolic_rotation_matrix('m', 2)\n"
        "import matplotlib\nmatplotlib.use('Agg')\nrope_lib.plot_encoding(length=8, d=4)"
    )
    assert {"sympy", "matplotlib"} <= loaded


def test_lazy_module_behaves_like_the_module() -> None:
    import math

    lazy_math = lazy_import("math")
    assert lazy_math.sqrt(16.0) == math.sqrt(16.0)
    assert "math" in repr(lazy_math)


def test_every_name_the_package_lists_resolves() -> None:
    """``dir(rope_lib)`` offers names to tab completion: each must import (it once listed
    two removed modules, ``plotting`` and ``widgets``, whose access raised)."""
    script = (
        "import rope_lib\n"
        "bad = []\n"
        "for name in dir(rope_lib):\n"
        "    try:\n"
        "        getattr(rope_lib, name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {exc!r}')\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", out
