# The book's jobs, one target each.  A fresh clone needs only `make book` and
# `make test`: everything else (the virtual environment, the offline web assets,
# the headless browser) is installed by the targets that need it.

SHELL      := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
JB         := $(VENV)/bin/jupyter-book
BOOK_DIR   ?= .
BUILD_DIR  := _build
VENV_STAMP := $(VENV)/.installed
VENDOR     := _assets/vendor
VENDOR_STAMP := $(VENDOR)/.installed
BINDER_ENV   := $(BUILD_DIR)/binder-venv
BINDER_STAMP := $(BINDER_ENV)/.installed
PORT       ?= 8000
LAB_PORT   ?= 8888

# Front-end packages the built site serves itself (no CDN), fetched from the npm
# registry by exact version.
MATHJAX      := mathjax@3.2.2
REQUIREJS    := requirejs@2.3.8
HTML_MANAGER := @jupyter-widgets/html-manager@1.0.6
# The accessibility engine of tests/test_a11y.py, fetched for the tests only (never served).
AXE          := axe-core@4.14.1
AXE_JS       := $(BUILD_DIR)/axe/axe.min.js

# -W: any warning fails the build; -n: nitpicky references; --keep-going: list
# every warning before failing.  Notebook errors fail the build through
# `nb_execution_raise_on_error` in _config.yml.
JB_FLAGS := -W -n --keep-going

.PHONY: book test bench mutation lint serve lab student instructor clean venv assets browser jb-build experiment binder-env

book: $(VENV_STAMP) $(VENDOR_STAMP)
	@$(MAKE) --no-print-directory jb-build

# Execution cache for fast rebuilds.  jupyter-cache keys on code cells only, so a
# change in rope_lib would leave stale outputs, and Sphinx would not even re-read an
# unchanged chapter: drop both caches when the hash of rope_lib moves.
jb-build:
	@mkdir -p $(BUILD_DIR)
	@hash=$$( (find rope_lib -type f \( -name '*.py' -o -path '*/data/*' -o -path '*/static/*' \) \
	          2>/dev/null || true) | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -c1-16); \
	if [ "$$(cat $(BUILD_DIR)/.rope_lib_hash 2>/dev/null)" != "$$hash" ]; then \
	  echo "rope_lib changed: clearing the execution cache"; \
	  rm -rf $(BUILD_DIR)/.jupyter_cache $(BUILD_DIR)/jupyter_execute $(BUILD_DIR)/.doctrees; \
	  echo "$$hash" > $(BUILD_DIR)/.rope_lib_hash; \
	fi
	ROPE_LIB_STATIC=1 $(JB) build $(BOOK_DIR) $(JB_FLAGS)

# The Binder environment (tests/test_binder.py) is made while the book builds: the build
# mostly waits on one notebook kernel at a time, so the second core is free.
test:
	@$(MAKE) --no-print-directory -j2 book browser binder-env $(AXE_JS)
	$(PY) -m pytest -n 2 --dist loadgroup tests

# QUICK=1: every benchmark in its quick mode (fewer repetitions, no full minimum-base table),
# a check that all of them run; CI runs it.
bench: $(VENV_STAMP) $(VENDOR_STAMP) browser
	$(PY) -m bench $(if $(filter 1 yes true,$(QUICK)),--quick)

# Every sweep chapter 9 reads (rope_lib/experiments): the runs of both experiments on two
# worker processes, longest first, one progress bar with the time left; resumable
# (_build/experiments); writes rope_lib/data/experiment_<experiment>_<config>.json.
# SMOKE=1: the smoke sweeps instead, written under _build only.
experiment: $(VENV_STAMP)
	$(PY) -m rope_lib.experiments $(if $(SMOKE),--smoke)

# Mutation testing (tools/mutation.py): each math module's mutants against its own tests;
# writes tools/mutation-summary.json.  QUICK=1: CI's fixed sample (the certified step and
# curvature bound of chapter 7's sweep, apply_rope's NumPy route); fails on a survivor
# that no test kills and tools/mutation-equivalent.toml does not explain.
mutation: $(VENV_STAMP)
	$(PY) tools/mutation.py $(if $(filter 1 yes true,$(QUICK)),--quick)

lint: $(VENV_STAMP)
	$(VENV)/bin/ruff check rope_lib tests bench tools course _ext
	$(VENV)/bin/ruff format --check rope_lib tests bench tools course _ext

serve: book
	$(PY) -m http.server --bind 127.0.0.1 --directory $(BUILD_DIR)/html $(PORT)

# JupyterLab from .venv on 127.0.0.1:$(LAB_PORT), opening on index.md, with the
# chapters opening as notebooks (Jupytext) and live sliders (ipywidgets); a busy
# port is refused with a one-line message.  See tools/lab.py.
lab: $(VENV_STAMP)
	$(PY) tools/lab.py --port '$(LAB_PORT)'

# The student edition: every chapter as a plain .ipynb without the exercise solutions,
# with otter-grader self-checks (tests/ next to the notebooks).  It takes the text of the
# book's cross-references from the book build, hence `book` first.  An existing edition
# with changes (a student's answers) is never overwritten: the new one goes beside it
# (_build/student-2, ...).  See course/student.py.
student: $(VENV_STAMP) book
	$(PY) -m course.student --out $(BUILD_DIR)/student

# For the teacher only: the chapters with their solutions, the answer key of every
# self-check and an otter-grader autograder archive per chapter.  The chapters are executed
# once for both editions (_build/course-cache).  See course/instructor.py.
instructor: $(VENV_STAMP) book
	$(PY) -m course.instructor --out $(BUILD_DIR)/instructor

# Everything in _build but the student editions (students' answers may be saved there:
# remove them yourself).
clean:
	@kept=$$(find $(BUILD_DIR) -mindepth 1 -maxdepth 1 -name 'student*' 2>/dev/null || true); \
	find $(BUILD_DIR) -mindepth 1 -maxdepth 1 ! -name 'student*' -exec rm -rf {} + 2>/dev/null || true; \
	if [ -n "$$kept" ]; then echo "make clean: kept" $$kept "(students' work may be in it: remove it yourself)"; fi
	rm -rf $(VENDOR) .pytest_cache .ruff_cache .hypothesis

venv: $(VENV_STAMP)

# A fresh environment made as repo2docker makes Binder's (tools/binder_env.py).  After
# .venv: both install rope_lib in editable mode, which rewrites rope_lib.egg-info.
binder-env: $(BINDER_STAMP)

$(BINDER_STAMP): binder/requirements.txt requirements.txt pyproject.toml tools/binder_env.py | $(VENV_STAMP)
	$(PYTHON) tools/binder_env.py $(BINDER_ENV)

$(VENV_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

assets: $(VENDOR_STAMP)

$(VENDOR_STAMP): Makefile
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd "$$tmp" && \
	npm pack --silent $(MATHJAX) $(REQUIREJS) $(HTML_MANAGER) >/dev/null && \
	for f in *.tgz; do mkdir -p "$${f%.tgz}" && tar -xzf "$$f" -C "$${f%.tgz}"; done && \
	cd - >/dev/null && \
	mkdir -p $(VENDOR)/mathjax $(VENDOR)/requirejs $(VENDOR)/html-manager && \
	cp -r "$$tmp"/mathjax-*/package/es5/. $(VENDOR)/mathjax/ && \
	cp "$$tmp"/mathjax-*/package/LICENSE $(VENDOR)/mathjax/ && \
	cp "$$tmp"/requirejs-*/package/require.js $(VENDOR)/requirejs/require.js && \
	cp "$$tmp"/jupyter-widgets-html-manager-*/package/dist/* $(VENDOR)/html-manager/ && \
	cp "$$tmp"/jupyter-widgets-html-manager-*/package/LICENSE $(VENDOR)/html-manager/ && \
	rm -f $(VENDOR)/html-manager/*.map
	touch $@

$(AXE_JS): Makefile
	rm -rf $(@D) && mkdir -p $(@D)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	(cd "$$tmp" && npm pack --silent $(AXE) >/dev/null && tar -xzf axe-core-*.tgz) && \
	cp "$$tmp"/package/axe.min.js "$$tmp"/package/LICENSE $(@D)/

# Debian's Chromium and its driver for the real-browser tests (root on CI).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi
