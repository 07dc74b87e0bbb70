"""Start JupyterLab for the book (``make lab``).

JupyterLab runs from the environment of the Python that runs this script (``.venv``
under ``make``), on 127.0.0.1 only, and opens on the landing page ``index.md``
(rendered, in JupyterLab's Markdown Preview) with the file browser in ``chapters/``.
Before it starts, this script

* refuses a busy port with one line that names the port and how to choose another
  (JupyterLab itself would silently move to the next free port);
* installs ``tools/jupyterlab-overrides.json`` as the environment's JupyterLab
  settings overrides (``<app dir>/settings/overrides.json``, where ``<app dir>`` is
  what ``jupyter lab path`` prints, ``.venv/share/jupyter/lab``): the chapters
  (``*.md``) open as notebooks through Jupytext's "Jupytext Notebook" viewer, and
  JupyterLab neither fetches news nor checks for updates.  Nothing is written to
  the user's ``~/.jupyter``; settings a user saves there still take precedence;
* writes the workspace ``rope-book`` (``tools/jupyterlab-workspace.json``: the
  layout above) into the environment's workspaces directory,
  ``<app dir>/workspaces``, which this JupyterLab uses instead of
  ``~/.jupyter/lab/workspaces``.  It is rewritten at every start, so ``make lab``
  always opens on the landing page.

The landing page and the chapters are all ``.md`` files, so they share one default
viewer; a plain Markdown page such as ``index.md`` opened as a Jupytext notebook
shows its source in cells and asks for a kernel.  Hence the workspace, which opens
``index.md`` in the Markdown Preview explicitly.

Usage: ``python tools/lab.py [--port PORT] [--root DIR] [--workspaces DIR]
[-- JUPYTERLAB ARGS...]``.

``python tools/lab.py --workspace-only`` writes the ``rope-book`` workspace into the
workspaces folder of whoever runs it (JupyterLab's own default, under ``~/.jupyter`` or
``$JUPYTER_CONFIG_DIR``) and starts nothing: ``tools/hub-user-start`` runs it at every
JupyterHub server start, so every user of a hub gets the landing layout (see the teaching
page).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = Path(__file__).with_name("jupyterlab-overrides.json")
WORKSPACE = Path(__file__).with_name("jupyterlab-workspace.json")
WORKSPACE_NAME = "rope-book"
LANDING = "index.md"
HOST = "127.0.0.1"


class LabError(Exception):
    """A problem reported to the user in one line, before JupyterLab starts."""


def parse_port(text: str) -> int:
    """The TCP port given as ``LAB_PORT``.

    Parameters
    ----------
    text : str
        The value of ``LAB_PORT`` (``make lab LAB_PORT=8890``).

    Returns
    -------
    int
        The port, an integer from 1 to 65535.

    Raises
    ------
    LabError
        If ``text`` is not such an integer.
    """
    try:
        port = int(text.strip())
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise LabError(f"LAB_PORT must be a TCP port, an integer from 1 to 65535; got {text!r}")
    return port


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on ``host:port`` now.

    Binds with ``SO_REUSEADDR``, as JupyterLab's server does, so a port left in
    TIME_WAIT by a server that just stopped counts as free.

    Parameters
    ----------
    port : int
        TCP port.
    host : str
        Address to bind.

    Returns
    -------
    bool
        False if the port is in use (or not ours to bind), True otherwise.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def check_port(port: int) -> None:
    """Refuse a busy port in one line that says how to choose another.

    Parameters
    ----------
    port : int
        The port JupyterLab should listen on.

    Raises
    ------
    LabError
        If ``port`` is busy on 127.0.0.1; the message suggests a port that is free now
        (the nearest one above, if any among the next 100).
    """
    if port_is_free(port):
        return
    spare = next((p for p in range(port + 1, min(port + 101, 65536)) if port_is_free(p)), None)
    example = f"make lab LAB_PORT={spare}" if spare else "make lab LAB_PORT=<another port>"
    raise LabError(
        f"port {port} on {HOST} is busy (another program is listening on it); "
        f"choose another port with `{example}`"
    )


def app_dir() -> Path:
    """JupyterLab's application directory of this environment (``jupyter lab path``)."""
    try:
        from jupyterlab.commands import get_app_dir
    except ImportError:
        raise LabError(
            f"JupyterLab is not installed for {sys.executable}; "
            "`make lab` installs it from requirements.txt into .venv"
        ) from None

    return Path(get_app_dir())


def install_overrides(directory: Path) -> Path:
    """Merge the book's JupyterLab settings overrides into an application directory.

    ``make lab`` installs them into ``.venv``; ``binder/postBuild`` into the Binder
    environment, whose ``overrides.json`` may already hold other settings.

    Parameters
    ----------
    directory : Path
        JupyterLab's application directory (:func:`app_dir`).

    Returns
    -------
    Path
        The ``settings/overrides.json`` written: the book's settings
        (``tools/jupyterlab-overrides.json``) over those already there, each plugin's
        dictionary-valued settings merged key by key; rewritten only if it changes.
    """
    target = directory / "settings" / "overrides.json"
    before = target.read_text(encoding="utf-8") if target.exists() else None
    merged = json.loads(before) if before else {}
    for plugin, values in json.loads(OVERRIDES.read_text(encoding="utf-8")).items():
        current = merged.setdefault(plugin, {})
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(current.get(key), dict):
                current[key] = {**current[key], **value}
            else:
                current[key] = value
    text = json.dumps(merged, indent=2) + "\n"
    if text != before:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target


def install_workspace(workspaces: Path) -> Path:
    """Write the ``rope-book`` workspace (the landing layout) into ``workspaces``.

    Parameters
    ----------
    workspaces : Path
        The workspaces directory JupyterLab is given (``--LabApp.workspaces_dir``).

    Returns
    -------
    Path
        The workspace file, as JupyterLab's own workspace manager names it.
    """
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    return WorkspacesManager(str(workspaces)).save(
        WORKSPACE_NAME, WORKSPACE.read_text(encoding="utf-8")
    )


def lab_command(port: int, root: Path, workspaces: Path, extra: Sequence[str] = ()) -> list[str]:
    """The ``jupyter-lab`` command line next to this Python.

    Parameters
    ----------
    port : int
        Port on 127.0.0.1.
    root : Path
        Directory JupyterLab serves (its file browser root); must hold ``index.md``.
    workspaces : Path
        JupyterLab's workspaces directory.
    extra : sequence of str
        Further JupyterLab arguments (e.g. ``--IdentityProvider.token=...``).

    Returns
    -------
    list of str
        The command, to be run as is.
    """
    executable = Path(sys.executable).with_name("jupyter-lab")
    if not executable.exists():
        raise LabError(
            f"JupyterLab is not installed next to {sys.executable}; "
            "`make lab` installs it from requirements.txt into .venv"
        )
    # Jupyter refuses to run as root unless told; containers and CI often run as root,
    # and the server listens on 127.0.0.1 only.
    as_root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [
        str(executable),
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # a busy port is an error, not a silent move
        "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.workspaces_dir={workspaces}",
        f"--LabApp.default_url=/lab/workspaces/{WORKSPACE_NAME}",
        *as_root,
        *extra,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Check the port, install the settings and replace this process by JupyterLab."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", default=os.environ.get("LAB_PORT", "8888"))
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument(
        "--workspaces", type=Path, default=None, help="default: <app dir>/workspaces"
    )
    parser.add_argument(
        "--workspace-only",
        action="store_true",
        help="write the rope-book workspace into this user's workspaces folder and exit",
    )
    parser.add_argument("extra", nargs="*", help="arguments passed on to JupyterLab")
    args = parser.parse_args(argv)
    if args.workspace_only:
        try:
            from jupyterlab.labapp import LabApp
        except ImportError:
            print(f"make lab: JupyterLab is not installed for {sys.executable}", file=sys.stderr)
            return 2
        folder = Path(args.workspaces or LabApp().workspaces_dir)
        print(f"rope-book workspace: {install_workspace(folder)}")
        return 0
    try:
        port = parse_port(str(args.port))
        if not (args.root / LANDING).is_file():
            raise LabError(f"--root must be a directory holding {LANDING}; got {args.root}")
        check_port(port)
        lab_dir = app_dir()
        workspaces = (args.workspaces or lab_dir / "workspaces").resolve()
        command = lab_command(port, args.root.resolve(), workspaces, args.extra)
        install_overrides(lab_dir)
        install_workspace(workspaces)
    except LabError as error:
        print(f"make lab: {error}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(command[0], command)
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
