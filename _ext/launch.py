"""Sphinx extension: Binder and JupyterHub launch buttons from one repository setting.

sphinx-book-theme draws a launch menu on every notebook page from
``launch_buttons.binderhub_url`` / ``launch_buttons.jupyterhub_url`` and the
repository URL (Jupyter Book maps ``repository.url`` in ``_config.yml`` to the theme
option ``repository_url``).  Without a usable repository URL those buttons would be
dead links (or, for an empty URL, the theme fails), so this extension decides once,
when the configuration is read:

* ``repository.url`` empty or a placeholder: every launch button is switched off and
  the build says, at INFO level (the build runs with ``-W``), which setting to fill;
* ``launch_buttons.jupyterhub_url`` (or ``binderhub_url``) empty: that one button is
  off, and the build says which setting turns it on;
* a setting that is not an ``http(s)://host/...`` URL, or a ``notebook_interface``
  other than ``classic`` / ``jupyterlab``, stops the build with an error naming it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

#: Jupyter Book's own default for ``repository.url``: a book that leaves the setting
#: out would otherwise get launch buttons pointing at Jupyter Book's repository.
JUPYTER_BOOK_DEFAULT_URL = "https://github.com/executablebooks/jupyter-book"

#: Launch providers that need the book's repository (all but Thebe and JupyterLite).
REPOSITORY_PROVIDERS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url")

#: The hosts sphinx-book-theme recognises without a ``repository_provider`` option.
KNOWN_PROVIDERS = ("github", "gitlab", "bitbucket")

NOTEBOOK_INTERFACES = ("classic", "jupyterlab")


def is_placeholder(url: str) -> bool:
    """Whether a repository URL is unset: empty, Jupyter Book's default, or a template.

    Parameters
    ----------
    url : str
        The value of ``repository.url``.

    Returns
    -------
    bool
        True for ``""``, Jupyter Book's default URL, a URL with ``<...>`` or ``{...}``
        template fields, or one on the reserved ``example.com/org/net`` hosts.
    """
    url = url.strip().rstrip("/")
    if not url or url == JUPYTER_BOOK_DEFAULT_URL:
        return True
    if any(ch in url for ch in "<>{}"):
        return True
    host = (urlparse(url).hostname or "").lower()
    return host.split(".")[-2:] in (["example", "com"], ["example", "org"], ["example", "net"])


def _check_http_url(value: Any, setting: str, *, repository: bool = False) -> str:
    if not isinstance(value, str):
        raise ConfigError(
            f"{setting} in _config.yml must be a URL string such as "
            f"{'https://github.com/ORG/REPO' if repository else 'https://mybinder.org'}, "
            f"got {value!r}"
        )
    parsed = urlparse(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            f"{setting} in _config.yml must be an http:// or https:// URL, got {value!r}"
        )
    if repository and len([p for p in parsed.path.split("/") if p]) < 2:
        raise ConfigError(
            f"{setting} in _config.yml must name the repository as https://HOST/ORG/REPO, "
            f"got {value!r}"
        )
    return value.strip()


def configure_launch_buttons(app: Sphinx, config: Config) -> None:
    """Switch launch buttons on or off from ``repository.url``; say what to fill.

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The running Sphinx application.
    config : sphinx.config.Config
        Its configuration; ``html_theme_options`` is edited in place.

    Raises
    ------
    sphinx.errors.ConfigError
        If a URL setting is not an http(s) URL, or ``notebook_interface`` is not one
        of ``classic`` / ``jupyterlab``.
    """
    options = config.html_theme_options
    launch = dict(options.get("launch_buttons") or {})
    if not launch:
        return
    interface = launch.get("notebook_interface", "classic")
    if interface not in NOTEBOOK_INTERFACES:
        raise ConfigError(
            f"launch_buttons.notebook_interface in _config.yml must be one of "
            f"{', '.join(NOTEBOOK_INTERFACES)}, got {interface!r}"
        )
    for key in ("binderhub_url", "jupyterhub_url"):
        value = launch.get(key) or ""
        if value:
            launch[key] = _check_http_url(value, f"launch_buttons.{key}")

    repo_url = options.get("repository_url") or ""
    if not isinstance(repo_url, str):
        _check_http_url(repo_url, "repository.url", repository=True)
    if is_placeholder(repo_url):
        for key in REPOSITORY_PROVIDERS:
            launch[key] = ""
        options["repository_url"] = ""
        LOGGER.info(
            "launch buttons off: set repository.url in _config.yml to the book's Git "
            "repository (https://HOST/ORG/REPO) to add Binder and JupyterHub buttons"
        )
    else:
        repo_url = _check_http_url(repo_url, "repository.url", repository=True)
        host = (urlparse(repo_url).hostname or "").lower()
        if not options.get("repository_provider") and not any(
            name in host for name in KNOWN_PROVIDERS
        ):
            raise ConfigError(
                f"repository.url in _config.yml is on {host}, which sphinx-book-theme "
                "does not recognise: use a github.com, gitlab.com or bitbucket.org URL, or "
                "set sphinx.config.html_theme_options.repository_provider"
            )
        options["repository_url"] = repo_url
        if not launch.get("binderhub_url"):
            LOGGER.info(
                "Binder launch button off: set launch_buttons.binderhub_url in "
                "_config.yml (e.g. https://mybinder.org)"
            )
    if not launch.get("jupyterhub_url"):
        LOGGER.info(
            "JupyterHub launch button off: set launch_buttons.jupyterhub_url in "
            "_config.yml to your JupyterHub's address"
        )
    options["launch_buttons"] = launch


def setup(app: Sphinx) -> dict[str, Any]:
    """Check the launch settings once the configuration is read."""
    app.connect("config-inited", configure_launch_buttons)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
