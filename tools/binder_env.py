"""Make the Binder environment on this machine, as repo2docker makes it (``make binder-env``).

A fresh virtual environment in ``_build/binder-venv`` receives, in repo2docker's order:

1. the Jupyter packages of repo2docker's base environment (:data:`REPO2DOCKER_BASE`);
2. ``binder/requirements.txt``, installed with the ``pip`` script from the repository root
   (repo2docker's working directory, so the ``-e .`` inside ``../requirements.txt`` is the
   repository).  Its ``--extra-index-url`` line (PyTorch's CPU index) is left out: these
   machines reach only their own package registry, which serves the same CPU build.

``binder/postBuild`` is not run here: tests/test_binder.py runs it, with its own home
folder.  The stamp file ``.installed`` holds a hash of the files the environment is made
from; tests/test_binder.py remakes the environment when the hash is stale, so ``pytest``
alone works too.  ``make test`` makes it while the book builds, which saves CI time.

Usage: ``python tools/binder_env.py [DIR]`` (default ``_build/binder-venv``).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "_build" / "binder-venv"
STAMP = ".installed"

#: The Jupyter packages of repo2docker's base environment for Python 3.11
#: (repo2docker/buildpacks/conda/environment.py-3.11-linux-64.lock, frozen 2025-10-16),
#: which binder/requirements.txt is installed on top of.  notebook 7.4.7 requires
#: jupyterlab<4.5, so without binder's own notebook pin `pip check` fails.
REPO2DOCKER_BASE = (
    "notebook==7.4.7",
    "jupyterlab==4.4.9",
    "jupyterlab_server==2.27.3",
    "jupyter_server==2.17.0",
    "jupyterlab_widgets==3.0.15",
    "ipywidgets==8.1.7",
    "ipykernel==7.0.1",
)

#: The files the environment is made from (their hash is the stamp).
SOURCES = (
    ROOT / "binder" / "requirements.txt",
    ROOT / "requirements.txt",
    ROOT / "pyproject.toml",
    Path(__file__).resolve(),
)


def source_hash() -> str:
    """SHA-256 of :data:`SOURCES`, in order: what a made environment's stamp must hold."""
    digest = hashlib.sha256()
    for path in SOURCES:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def is_current(venv: Path = DEFAULT) -> bool:
    """Whether ``venv`` was made, completely, from the current :data:`SOURCES`."""
    stamp = venv / STAMP
    return stamp.is_file() and stamp.read_text().strip() == source_hash()


def _pip(venv: Path, args: list[str]) -> None:
    # the `pip` script, as repo2docker calls it: `python -m pip` would put the working
    # directory on sys.path, where pip then reads rope_lib.egg-info while the editable
    # build rewrites it (seen on CI: "expected string ..., got 'NoneType'")
    command = [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check"]
    command += ["--no-compile", "--quiet", *args]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise SystemExit(
            f"binder_env: `pip install {' '.join(args)}` failed:\n"
            + result.stdout[-3000:]
            + result.stderr[-3000:]
        )


def make(venv: Path = DEFAULT) -> Path:
    """Make the Binder environment in ``venv`` from scratch (see the module docstring).

    Parameters
    ----------
    venv : Path
        Directory of the new environment; anything there is removed first.

    Returns
    -------
    Path
        ``venv``, with its stamp written last (an interrupted run leaves no stamp).
    """
    for attempt in (1, 2):  # ensurepip once failed on CI with no message kept: say why
        shutil.rmtree(venv, ignore_errors=True)
        created = subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=600
        )
        if created.returncode == 0:
            break
        print(f"binder_env: venv attempt {attempt} failed:\n{created.stdout}{created.stderr}")
    else:
        raise SystemExit(f"binder_env: could not create a venv in {venv}")
    _pip(venv, list(REPO2DOCKER_BASE))
    with tempfile.TemporaryDirectory() as mirror:
        # the same layout (binder/requirements.txt beside ../requirements.txt), one line less
        (Path(mirror) / "binder").mkdir()
        lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
        keep = [line for line in lines if not line.startswith("--extra-index-url")]
        (Path(mirror) / "binder" / "requirements.txt").write_text("\n".join(keep) + "\n")
        shutil.copy(ROOT / "requirements.txt", Path(mirror) / "requirements.txt")
        _pip(venv, ["-r", str(Path(mirror) / "binder" / "requirements.txt")])
    (venv / STAMP).write_text(source_hash() + "\n")
    return venv


def main(argv: list[str] | None = None) -> int:
    """Command line: make the environment in the given directory (or the default)."""
    args = sys.argv[1:] if argv is None else argv
    venv = Path(args[0]).resolve() if args else DEFAULT
    make(venv)
    print(f"binder_env: made {venv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
