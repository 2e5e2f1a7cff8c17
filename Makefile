# Two entry points (see README):  make lab   and   make test
# Both create .venv with the pinned versions of requirements/ci.txt on first use; no venv needs to
# be active for any target here.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab
# Every extra of pyproject.toml: what `make test` needs (the lab's own set-up takes `lab` alone). `make
# test` also installs the room (room/, its own distribution) for its hub and room tests; `make lab` does not.
ALL_EXTRAS := lab,test,browser
PIP    := $(BIN)/python -m pip --disable-pip-version-check
PIP_INSTALL := $(PIP) install -q --root-user-action=ignore
# Each stage of `make test` prints its wall time; `scripts/timed --summary` lists them at the end.
TIMED  := scripts/timed
# The second Triton whose interpreter runs the kernel tests (the newest, with the strictest masks),
# installed once beside the pinned one, in a folder named after its version.
TRITON_NEXT := 3.9.0
TRITON_NEXT_DIR := $(VENV)/triton-$(TRITON_NEXT)
# Without Chromium the browser stage is a skip (reason printed) unless LABKIT_REQUIRE_BROWSER=1,
# as .ci/run sets: then the browser test fails instead of skipping.
BROWSER_SKIP := $(if $(filter 1,$(LABKIT_REQUIRE_BROWSER)),,--allow-skip)
# Extra arguments for `make repro`, `make bench-cpu`, e.g. make repro ARGS="--modes all".
ARGS ?=
# Where the set-up takes torch from (python -m labkit setup pip-source decides; README says more):
# TORCH=cpu, the default, takes the CPU build on Linux from PyTorch's CPU index (PyPI's Linux torch
# is the CUDA build, several GB), adding that index only where pip cannot already find the pinned
# CPU build on disk; TORCH=cuda takes PyPI's torch. WHEELHOUSE=DIR installs from DIR alone, with
# no index at all (a room without a good network: `make wheelhouse` fills DIR beforehand).
TORCH ?= cpu
WHEELHOUSE ?=
# INSTALLER=auto (the default): uv, pinned, where it installs, else pip; INSTALLER=pip: pip alone.
INSTALLER ?= auto
# The room stage of `make test` downloads a fresh wheelhouse here and builds binder/'s environment
# from it, offline; LABKIT_ROOM_PYTHON is the interpreter it makes that environment with.
ROOM_WHEELHOUSE := build/room-wheelhouse
# Test processes per pytest stage (pytest-xdist): the CPUs this process may use, at most 4. Most
# tests and notebooks spend their time in one Python thread (the Triton interpreter, the toy
# models on one thread), so a worker per core runs the stage nearly that many times faster
# (docs/MAINTAINING.md's make-test block has the measured stages). `make test JOBS=1` runs everything in one
# process, in file order.
CPUS := $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1)")
JOBS ?= $(if $(filter 1 2 3,$(CPUS)),$(CPUS),4)
# Every value above that a user may set (and LABKIT_BACKEND) is checked before anything runs: a bad one
# stops make with one line that names it and the choices, exit status 2 (scripts/check_make_vars.py).
ifneq ($(MAKECMDGOALS),clean)
MAKE_VARS_ERROR := $(shell $(PYTHON) scripts/check_make_vars.py 'LABKIT_BACKEND=$(LABKIT_BACKEND)' \
	'JOBS=$(JOBS)' 'TORCH=$(TORCH)' 'WHEELHOUSE=$(WHEELHOUSE)' 'INSTALLER=$(INSTALLER)' --goals '$(MAKECMDGOALS)')
ifneq ($(MAKE_VARS_ERROR),)
$(error $(MAKE_VARS_ERROR))
endif
endif
# Math threads per test process: this process's CPUs shared out among the JOBS processes that run
# side by side (at least 1). Unshared, each process would start a thread per core, and torch's OpenMP
# threads spin waiting for one another on oversubscribed cores, so a cell of small tensor ops slows
# down most when another notebook runs beside it. An OMP_NUM_THREADS set by the caller wins.
# (expr's `| 1` turns a quotient of 0, more JOBS than CPUs, into 1; JOBS was checked above.)
TEST_THREADS := $(or $(OMP_NUM_THREADS),$(shell expr $(CPUS) / $(JOBS) \| 1))
TEST_ENV := OMP_NUM_THREADS=$(TEST_THREADS) MKL_NUM_THREADS=$(TEST_THREADS)
# worksteal: a worker that runs out takes tests queued on the other (a few tests take far longer
# than the rest).
# Notebooks go whole to one worker (loadscope: a notebook's cells share one kernel, in order).
XDIST_TESTS     := $(if $(filter 1,$(JOBS)),-p no:xdist,-n $(JOBS) --dist worksteal)
XDIST_NOTEBOOKS := $(if $(filter 1,$(JOBS)),-p no:xdist,-n $(JOBS) --dist loadscope)

.PHONY: hub lab lab-check test lint test-unit test-unit-backend test-every-backend test-notebooks test-room \
	test-room-begin test-room-end test-hub test-hub-begin test-hub-end test-triton-next-begin test-triton-next-end \
	test-triton-next test-browser test-clock \
	wheelhouse repro info student figures refresh bench-cpu mutants clean

# Bytecode is compiled after the install, on every core (pip compiles file by file on one, a large
# part of the set-up on 2 cores). Like pip, it ignores files that are not Python 3 source
# (templates, py2 leftovers in some wheels); without .pyc files every process that imports torch
# would take seconds longer where PYTHONDONTWRITEBYTECODE is set.
# The set-up: a venv, then the kit at the pins (python -m labkit setup install: uv where it installs,
# else pip; it compiles the bytecode on every core afterwards). `make lab` installs the lab extra
# alone and compiles what the lab imports while it waits, the rest in the background; `make test`
# (and every other target) every extra and the room, all compiled; either stamp is redone when the pins change.
define SETUP
	@$(TIMED) set-up sh -c '\
		$(PYTHON) -c "import sys; sys.exit(sys.version_info < (3, 11) and \"labkit needs Python 3.11 or newer; this is \" + sys.version.split()[0] + \": run make PYTHON=python3.11 ...\")" && \
		{ [ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV); } && \
		$(BIN)/python -m labkit setup install "$(1)" --torch "$(TORCH)" --wheelhouse "$(WHEELHOUSE)" \
			--installer "$(INSTALLER)" $(2)'
endef
$(LAB_STAMP): pyproject.toml requirements/ci.txt labkit/__init__.py
	$(call SETUP,lab,--compile-in-background)
	@touch $@
$(STAMP): pyproject.toml room/pyproject.toml requirements/ci.txt labkit/__init__.py
	$(call SETUP,$(ALL_EXTRAS),--room)
	@touch $@ $(LAB_STAMP)

# The venv alone, for `make wheelhouse` (it needs pip, not the kit's packages).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# A room without a good network: every wheel `make lab` installs (this platform and Python; on
# Linux the CPU torch unless TORCH=cuda), into WHEELHOUSE (default wheelhouse/, gitignored). Then,
# on each machine, with no network: make lab WHEELHOUSE=wheelhouse. Prints what it fetched.
# RECORD=1 also writes the sizes into labkit/data/cpu/downloads.json (docs/MAINTAINING.md's table).
wheelhouse: | $(BIN)/python
	@$(BIN)/python -m labkit setup wheelhouse "$(or $(WHEELHOUSE),wheelhouse)" --torch "$(TORCH)" \
		$(if $(filter 1,$(RECORD)),--record)

# Which notebooks `make lab` opens: EDITION=student (the default: a learner's folder, student/,
# built where missing; a learner's own copies are kept) or EDITION=instructor (notebooks/, solved).
# python -m labkit lab checks the value and the port (LAB_PORT) before anything starts.
EDITION ?= student
lab: lab-check $(LAB_STAMP)
	$(BIN)/python -m labkit lab --edition "$(EDITION)" $(ARGS)

# Before the set-up: a bad EDITION or port is one line at once, not after minutes of installing (the
# machine's Python runs it: `python -m labkit lab --check-only` needs only the standard library).
lab-check:
	@$(PYTHON) -m labkit lab --check-only --edition "$(EDITION)" $(ARGS)

# Stages in order, cheapest first; each prints its wall time, and the last line gives the whole wall
# time. Two stages run beside others (-begin, -end), each where a core would otherwise sit idle: the
# room stage (mostly pip on one core, and the network) beside the unit, backend-choice and notebook
# stages, and the Triton 3.9 stage beside the browser stage (whose processes wait on one another:
# page loads, kernel starts, polls). A background stage's output is shown when it is waited for; a stage that
# fails before then stops make, and make's exit ends the background stage.
test: test-clock lint test-room-begin test-unit test-unit-backend test-hub-begin test-notebooks test-room-end \
	test-triton-next-begin test-browser test-triton-next-end test-hub-end
	@$(TIMED) --summary

test-clock:
	@$(TIMED) --reset

# The linter first: seconds, and it catches a broken import before the long stages.
lint: $(STAMP)
	@$(TIMED) lint $(BIN)/ruff check .

test-unit: $(STAMP)
	@$(TEST_ENV) $(TIMED) unit $(BIN)/python -m pytest -q $(XDIST_TESTS) tests --ignore=tests/browser \
		--ignore=tests/test_hub.py

# A room of two on a real hub, attacked as a hostile learner would (tests/test_hub.py, as root; it
# skips without root): minutes of waiting on servers, kernels and Chromium more than of CPU, so in
# make test it runs beside the notebook, browser and Triton stages (-begin, -end), as the room stage does.
# scripts/hub_stage.py runs it from a place a room can serve (a checkout under /tmp or /var/tmp is
# mounted under /srv for it), and where it cannot run here says why in one line and passes.
HUB_STAGE = $(BIN)/python scripts/hub_stage.py -q -p no:xdist -p no:cacheprovider
test-hub: $(STAMP)
	@$(TEST_ENV) $(TIMED) hub $(HUB_STAGE)
test-hub-begin: $(STAMP)
	@$(TEST_ENV) $(TIMED) $(BESIDE) hub $(HUB_STAGE)
test-hub-end:
	$(call WAIT_FOR,hub)

# The tests of the backend choice again, with LABKIT_BACKEND set (the unit stage runs with it unset).
# On a CPU, LABKIT_BACKEND=interpreter makes labkit pick at import what it picks unset, so the rest of
# the unit stage would run the same code again; what differs is the code that reads the variable
# itself (labkit/backends.py's import-time check, `python -m labkit`'s auto and re-run rules), and
# these two files test it. Without Triton (macOS) there is no other value to pick: the stage says so.
BACKEND_CHOICE_TESTS := tests/test_backends.py tests/test_cli.py
ifeq ($(shell uname -s),Linux)
test-unit-backend: $(STAMP)
	@$(TEST_ENV) LABKIT_BACKEND=interpreter $(TIMED) unit-interpreter $(BIN)/python -m pytest -q $(XDIST_TESTS) \
		$(BACKEND_CHOICE_TESTS)
else
test-unit-backend:
	@echo "== stage unit-interpreter: skipped, LABKIT_BACKEND=interpreter needs Triton, published for Linux only"
endif

# The unit and notebook stages under every value of LABKIT_BACKEND this machine can run, one after
# another: unset, torch, interpreter where Triton is installed, triton where there is also a CUDA GPU
# (the GPU box). Not part of `make test`, which runs the backend choice's tests with one value set.
test-every-backend: $(STAMP)
	@for b in unset $$($(BIN)/python -c "import importlib.util as u, torch; t = u.find_spec('triton') is not None; \
			print('torch', 'interpreter' * t, 'triton' * (t and torch.cuda.is_available()))"); do \
		echo "== LABKIT_BACKEND=$$b: the unit stage, then the notebooks"; \
		if [ "$$b" = unset ]; then set -- env -u LABKIT_BACKEND $(TEST_ENV); else set -- env $(TEST_ENV) LABKIT_BACKEND=$$b; fi; \
		"$$@" $(BIN)/python -m pytest -q $(XDIST_TESTS) tests --ignore=tests/browser || exit 1; \
		LABKIT_ANSWERS=$(CURDIR)/build/nbval-answers "$$@" $(BIN)/python -m pytest -q $(XDIST_NOTEBOOKS) \
			--nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg notebooks || exit 1; \
	done

# The checkers keep each checked answer (labkit/workshop/exercises/kept_code.py): under test they go to build/,
# not into notebooks/my_answers/ beside the sources.
test-notebooks: $(STAMP)
	@$(TEST_ENV) LABKIT_ANSWERS=$(CURDIR)/build/nbval-answers $(TIMED) notebooks $(BIN)/python -m pytest -q $(XDIST_NOTEBOOKS) --nbval-lax --nbval-current-env \
		--nbval-sanitize-with notebooks/sanitize.cfg notebooks

# A room, offline: a fresh wheelhouse (what `make wheelhouse` runs), then binder/'s environment built
# from it alone as repo2docker would (a new venv stands in for conda), notebook 00 under nbval and
# the exercise checkers of 07 in it (tests/test_room_setup.py). One process: it is mostly pip.
# (No $(MAKE) in the recipe: `make -n` would run that line, and the tests dry-run this target.)
ROOM_STAGE = sh -c 'rm -rf $(ROOM_WHEELHOUSE) && \
	$(BIN)/python -m labkit setup wheelhouse "$(ROOM_WHEELHOUSE)" --torch cpu && \
	LABKIT_ROOM_WHEELHOUSE=$(ROOM_WHEELHOUSE) LABKIT_ROOM_PYTHON=$(PYTHON) \
	$(BIN)/python -m pytest -q -s -p no:xdist -p no:cacheprovider tests/test_room_setup.py'
test-room: $(STAMP)
	@$(TIMED) room $(ROOM_STAGE)
# The same stage in `make test`, in the background: $$PPID is the make running the recipe, and the
# stage ends if that make exits first. With JOBS=1 nothing runs beside anything: -begin runs the
# stage in the foreground and -end has nothing to wait for.
BESIDE = $(if $(filter 1,$(JOBS)),,--background $$PPID)
WAIT_FOR = $(if $(BESIDE),@$(TIMED) --wait $(1),@:)
test-room-begin: $(STAMP)
	@$(TIMED) $(BESIDE) room $(ROOM_STAGE)
test-room-end:
	$(call WAIT_FOR,room)

# Timed as its own stage (first run only), so that the summary's total is the whole wall time.
$(TRITON_NEXT_DIR)/.installed: | $(STAMP)
	@$(TIMED) install-triton-$(TRITON_NEXT) sh -c '\
		rm -rf $(TRITON_NEXT_DIR) && \
		$(PIP_INSTALL) --no-deps --target $(TRITON_NEXT_DIR) triton==$(TRITON_NEXT) && \
		PYTHONPATH=$(TRITON_NEXT_DIR) $(BIN)/python -c "import triton; assert triton.__version__ == \"$(TRITON_NEXT)\", triton.__version__"'
	@touch $@

# Kernel tests again under the newest Triton's interpreter, in JOBS workers as the unit stage (the
# interpreter runs on one thread, and a few of these tests outweigh the workers' start). Triton
# ships for Linux only: elsewhere (macOS) the kernels run on the torch backend and this stage says so.
# In make test it runs in the background (-begin, -end), as the room stage does.
TRITON_NEXT_STAGE = $(BIN)/python -m pytest -q $(XDIST_TESTS) tests/test_kernels.py
ifeq ($(shell uname -s),Linux)
test-triton-next: $(TRITON_NEXT_DIR)/.installed
	@$(TEST_ENV) PYTHONPATH=$(TRITON_NEXT_DIR) $(TIMED) triton-$(TRITON_NEXT) $(TRITON_NEXT_STAGE)
test-triton-next-begin: $(TRITON_NEXT_DIR)/.installed
	@$(TEST_ENV) PYTHONPATH=$(TRITON_NEXT_DIR) $(TIMED) $(BESIDE) triton-$(TRITON_NEXT) $(TRITON_NEXT_STAGE)
test-triton-next-end:
	$(call WAIT_FOR,triton-$(TRITON_NEXT))
else
test-triton-next test-triton-next-begin:
	@echo "== stage triton-$(TRITON_NEXT): skipped, Triton is published for Linux only"
test-triton-next-end:
endif

# Every notebook in JupyterLab, in Debian's Chromium (apt-get install -y chromium; never
# `playwright install`). This stage checks the lab itself -- every notebook runs in JupyterLab,
# the widgets answer -- so its kernels use the torch backend (far faster than the interpreter); the
# Triton source is exercised by the unit, notebook and Triton 3.9 stages before it. JOBS notebooks
# run side by side, each in its own kernel, in as many pages of one JupyterLab.
test-browser: $(STAMP)
	@$(TEST_ENV) LABKIT_BACKEND=torch LABKIT_BROWSER_PARALLEL=$(JOBS) $(TIMED) $(BROWSER_SKIP) browser $(BIN)/python -m pytest -q -rs tests/browser

# A JupyterHub for a room on this server, as root (docs/INSTRUCTOR_GUIDE.md, "One shared server"):
# one system user, JupyterLab and fresh student edition per learner; Ctrl-C closes it and removes them.
# JupyterHub's Node proxy goes into build/hub-proxy where npm is (else the hub runs its Python port).
# make hub LEARNERS=30 HUB_ARGS="--memory 4G --idle-timeout 45"
LEARNERS ?= 30
HUB_ARGS ?=
hub: $(STAMP)
	@if command -v npm >/dev/null; then $(BIN)/python -c "from labkit_room import proxy as p; p.node_proxy().exists() or p.install_node_proxy()"; fi
	$(BIN)/python -m labkit hub start --learners $(LEARNERS) $(HUB_ARGS)

repro: $(STAMP)
	$(BIN)/python -m labkit repro $(ARGS)

info: $(STAMP)
	$(BIN)/python -m labkit info

# The learner's folder that `make lab` opens, built anew (FRESH=1 also replaces a learner's copies).
student: $(STAMP)
	$(BIN)/python -m labkit student-edition --src notebooks --out student $(if $(filter 1,$(FRESH)),--fresh)

figures: $(STAMP)
	$(BIN)/python -m labkit figures

# After a record or the code changes (python -m labkit record merge RUN.json, make bench-cpu, make
# wheelhouse RECORD=1, an exercise, a constant): every rendered block of the docs and notebooks, the
# figures, and each notebook whose inputs changed, executed and saved on the CPU. Needs nothing but
# the repository (no GPU, no network, nothing under build/); run twice, the second changes nothing
# (docs/MAINTAINING.md).
refresh: $(STAMP)
	$(BIN)/python -m labkit refresh

# Wall times against the CPU targets (repro < 10 s, each notebook < 60 s, make test < 6 min without
# its set-up):
# printed, not asserted. make bench-cpu ARGS="--only fresh-clone" times `make test` from a clone, with
# the browser stage required as in CI (LABKIT_REQUIRE_BROWSER=1).
bench-cpu: $(STAMP)
	$(BIN)/python -m labkit bench-cpu $(ARGS)

# Each part of the fix broken on purpose in a copy of the tree; every mutant must fail a behavioural
# test (python -m labkit mutants --list lists them). Slow (a copy of the tree and its kernel or host tests
# per mutant), so not part of `make test`, whose unit stage checks that every mutant still applies
# (tests/test_mutants.py).
mutants: $(STAMP)
	$(BIN)/python -m labkit mutants $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build/stage-times.txt build/room build/room-wheelhouse build/hub-runtime build/hub-proxy
