# gpufleet: every entry point a developer or CI needs.
#   make demo   bring the lab fleet up, bootstrap it with site.yml, show that a
#               second run changes nothing, then a drift scan finds it in sync
#   make test   every test: unit, lint, sanity, Molecule, lab, inventory
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The venvs' interpreter: Debian's own Python, built with PGO and LTO. The
# machine's first python3 on PATH may be a plain source build (pyenv's,
# without --enable-optimizations), on which the Ansible controller, most of
# the tests' CPU, costs 1.1 to 1.3 times as much (docs/performance.md,
# "The controller's Python").
PYTHON ?= /usr/bin/python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Molecule and pytest write here instead of ~/.cache.
export MOLECULE_EPHEMERAL_DIRECTORY_BASE := $(CURDIR)/.cache/molecule
STAMP := .cache/stamps
TIMES := .cache/times.log
# Each pytest stage's JUnit report and each Molecule scenario's time, from
# which `make test` writes TEST_TIMES_DOC (tools/test_times.py).
JUNIT := .cache/junit
MOLECULE_TIMES := .cache/molecule-times.log
TEST_TIMES_DOC := docs/test-times.md
junit = --junitxml=$(JUNIT)/$(1).xml -o junit_family=xunit2
# Run a stage and record how long it took (figures for the closing notes).
timed = start=$$(date +%s); if $(2); then rc=0; else rc=$$?; fi; echo "$(1) $$(( $$(date +%s) - start ))s rc=$$rc" | tee -a $(TIMES); exit $$rc

.PHONY: help
help:
	@echo "make demo      lab fleet up, site.yml twice (second run: 0 changed), drift scan"
	@echo "make test      unit, lint, sanity, molecule, lab and inventory tests"
	@echo "make deps      venv, collections, host packages and podman settings, base images"
	@echo "make soak      unit and inventory stages 5 times in a row beside two CPU burners"
	@echo "make unit | lint | sanity | molecule | lab-test | inventory-test"
	@echo "make lab-fleet | lab-roles   the lab stage's two independent halves (make lab-guard: the guard's lab tests alone)"
	@echo "make lab-cli   the installed CLI's lab test (never beside lab-fleet: the same lab names)"
	@echo "make bench-inventory   inventory benchmark (not part of make test)"
	@echo "make bench-fleet       lab at 1, 4, 8 nodes: no-op converge and drift scan, three configs"
	@echo "make bench-molecule    Molecule's create and destroy: the podman driver's playbooks against ours"
	@echo "make bench-interpreter a podman test node's Python, discovered or named"
	@echo "make bench-controller  the Ansible controller's Python: the venv's against another python3"
	@echo "make bench-pull        gpufleet drift --from: 10,000 pull-mode reports fetched, merged, written"
	@echo "make bench-pull-node   one lab node: its own check-mode pull run against the push scan (takes over the lab)"
	@echo "make bench-revisions BEFORE=<rev>   this checkout against <rev> on the lab: tasks and CPU per no-op converge"
	@echo "make ee-context        the AWX execution environment's build context in build/ee/context"
	@echo "make ee-image EE_TAG=REGISTRY/NAME:TAG   build that image (needs registries: see docs/awx.md)"
	@echo "make molecule SCENARIO=baseline   one role's scenario"
	@echo "make gpu       GPU stack on this machine (needs an NVIDIA GPU)"
	@echo "make gpu-probe OUT=DIR   read-only nvidia-smi capture and checks into DIR (no venv; changes nothing)"
	@echo "make lab-down  remove the lab fleet"

# ---- dependencies --------------------------------------------------------
# Debian splits the venv module off its Python (python3-venv). It runs
# beside host-setup.sh (make deps), so apt waits for the other's lock.
venv_module = $(PYTHON) -c 'import ensurepip' 2>/dev/null || { apt-get -o DPkg::Lock::Timeout=300 update -qq && \
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends python3-venv; }
$(STAMP)/venv: pyproject.toml requirements/constraints.txt
	@mkdir -p $(STAMP)
	@$(call venv_module)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade 'pip>=24'
	$(BIN)/pip install --quiet -c requirements/constraints.txt -e '.[test]'
	touch $@

# galaxy-importer and antsibull-docs (make lint) in a venv of their own,
# pinned in requirements/lint-venv.txt, which says why not in this one.
LINT_VENV := .cache/lint-venv
LINT_BIN := $(CURDIR)/$(LINT_VENV)/bin
$(STAMP)/lint-venv: requirements/lint-venv.txt
	@mkdir -p $(STAMP)
	@$(call venv_module)
	test -x $(LINT_BIN)/python || $(PYTHON) -m venv $(LINT_VENV)
	$(LINT_BIN)/pip install --quiet --upgrade 'pip>=24'
	$(LINT_BIN)/pip install --quiet -r requirements/lint-venv.txt
	touch $@

# ansible-test's own virtual environments for `make sanity` (its pinned
# pylint, pycodestyle, yamllint and the rest), made here from PyPI while
# the host's packages, the images and the project venv are still on their
# way: made inside the sanity stage, they cost it 60 CPU-seconds of the
# unit, lint and sanity group's two CPUs (docs/performance.md, "Repeated
# work removed"). The lint venv's ansible-test makes them: it is ready first, and
# ansible-test names each environment by a hash of its pip commands, which
# are the same for the same ansible-core (both venvs pin one version,
# tests/unit/tools/test_makefile.py), so the project venv's ansible-test
# finds them.
$(STAMP)/sanity-venvs: $(STAMP)/lint-venv tools/sanity.sh
	PATH=$(LINT_BIN):$$PATH tools/sanity.sh --prime-venvs >.cache/sanity-venvs.log 2>&1 || \
	  { tail -n 40 .cache/sanity-venvs.log; exit 1; }
	touch $@

$(STAMP)/collections: $(STAMP)/venv requirements/collections.yml tools/install-collections.py
	$(BIN)/python tools/install-collections.py
	touch $@

.PHONY: venv lint-venv sanity-venvs collections host images image-12 image-13 prometheus-tools deps deps-all
venv: $(STAMP)/venv
lint-venv: $(STAMP)/lint-venv
sanity-venvs: $(STAMP)/sanity-venvs
collections: $(STAMP)/collections
host:
	tools/host-setup.sh
# promtool and a Prometheus server for the monitoring tests, unpacked from
# Debian's package into .cache/tools (see the script for why not installed).
# After host: both use apt, and apt takes one lock.
prometheus-tools: host
	tools/prometheus-tools.sh
# build-image.sh is itself idempotent: it rebuilds only when its recipe changed.
images: image-12 image-13
image-12: host
	tools/build-image.sh bookworm 12
image-13: host
	tools/build-image.sh trixie 13
# The dependencies side by side: pip waits on PyPI and debootstrap on
# Debian's mirror, so the virtual environment and the two images build at
# once (host setup first for the images and promtool, which need its apt).
DEPS_JOBS ?= 4
deps:
	@start=$$(date +%s); $(MAKE) --no-print-directory -j$(DEPS_JOBS) deps-all; \
	  echo "deps: ready in $$(( $$(date +%s) - start ))s ($(DEPS_JOBS) jobs)"
deps-all: venv lint-venv sanity-venvs collections images prometheus-tools

# ---- demo ----------------------------------------------------------------
.PHONY: demo lab-up lab-down
demo: deps
	$(BIN)/gpufleet lab up
	$(BIN)/ansible-playbook site.yml -i inventories/lab
	@echo "== second run: must change nothing =="
	$(BIN)/ansible-playbook site.yml -i inventories/lab | tee .cache/demo-second-run.log
	@grep -Eq 'changed=[1-9]|failed=[1-9]|unreachable=[1-9]' .cache/demo-second-run.log && \
	  { echo "demo: the second run was not idempotent"; exit 1; } || echo "demo: second run changed nothing"
	@echo "== drift: the converged fleet must be in sync =="
	$(BIN)/gpufleet drift -i inventories/lab
	@echo "== guard: every node's guard reports (spot, idle, spend) =="
	$(BIN)/gpufleet guard status -i inventories/lab
lab-up: deps
	$(BIN)/gpufleet lab up
lab-down: venv
	$(BIN)/gpufleet lab down

# ---- tests ---------------------------------------------------------------
.PHONY: test unit lint sanity molecule lab-test inventory-test gpu
# Every stage runs, even after one fails; the table at the end says which
# passed, and make test fails if any did not.
# Stages joined by + run side by side, each still timed and reported on its
# own. The lab stage runs as its two halves side by side (lab-fleet: the
# shared fleet, mostly waiting on SSH; lab-roles: one node at a time);
# STAGES="... lab-test ..." runs it as one process instead. Molecule beside
# the lab tests (molecule+lab-test) measured slower on a 2-CPU machine:
# each scenario 2.3x slower and the whole run longer (docs/testing.md;
# measured while Mitogen still pinned its runs to one CPU).
# The unit, lint and sanity stages side by side too: each alone left a
# fifth of the CPU idle. The inventory stage runs beside the lab (free ports,
# no podman). The installed CLI's lab test (lab-cli) runs beside Molecule,
# whose scenarios leave part of the CPU idle: in the lab half that holds the
# shared fleet it was that half's first minute, and the half was the longer.
# A group's own wall time is logged as well: the table's total
# is the wall time of the groups, not the sum of stages that overlapped.
STAGES ?= unit+lint+sanity molecule+lab-cli lab-fleet+lab-roles+inventory-test
test: deps
	@$(MAKE) --no-print-directory stages
.PHONY: stages
stages:
	@mkdir -p $(dir $(TIMES)) && : > $(TIMES) && rm -rf $(JUNIT) && : > $(MOLECULE_TIMES)
	@for group in $(STAGES); do \
	  if [[ $$group == *+* ]]; then \
	    start=$$(date +%s); \
	    for stage in $${group//+/ }; do \
	      { $(MAKE) --no-print-directory $(foreach f,$(MAKEFILE_LIST),-f $(f)) $$stage 2>&1 || true; } \
	        | sed -u "s/^/[$$stage] /" & \
	    done; \
	    wait; \
	    echo "$$group $$(( $$(date +%s) - start ))s rc=0" >> $(TIMES); \
	  else \
	    $(MAKE) --no-print-directory $(foreach f,$(MAKEFILE_LIST),-f $(f)) $$group || true; \
	  fi; \
	done
	@echo "== make test: stages =="
	@$(PYTHON) tools/test_times.py --times $(TIMES) --junit-dir $(JUNIT) --molecule-times $(MOLECULE_TIMES) \
	  --out $(TEST_TIMES_DOC) $(STAGES) || true
	@$(PYTHON) tools/stage_table.py $(TIMES) $(STAGES)

# The unit tests are independent of each other: one worker per CPU and one
# more, as some of them wait (on a subprocess, a server, a signal) rather
# than compute. Beside lint and sanity on two CPUs, 3 workers took the group
# 181 s against 223 s with 2 (docs/performance.md, "Test loop").
UNIT_JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))
unit: venv collections
	@$(call timed,unit,$(BIN)/pytest tests/unit -q -p no:cacheprovider -n $(UNIT_JOBS) $(call junit,unit))

# ansible-lint and the gates Galaxy and the Ansible docsite apply, cheapest
# first. Every step runs even after one fails (-k), so one run shows every
# finding; each step's time goes to $(TIMES) as lint-<step> beside the stage's.
LINT_STEPS := lint-role-docs lint-changelog lint-ansible-lint lint-collection-docs lint-galaxy-importer
lint: venv lint-venv collections
	@$(call timed,lint,$(MAKE) --no-print-directory -k lint-steps)
.PHONY: lint-steps $(LINT_STEPS)
lint-steps: $(LINT_STEPS)
# README option tables and test links against the roles (tools/role_docs.py).
lint-role-docs:
	@$(call timed,lint-role-docs,$(BIN)/python tools/role_docs.py --check)
lint-changelog:
	@$(call timed,lint-changelog,$(BIN)/antsibull-changelog lint)
lint-ansible-lint:
	@$(call timed,lint-ansible-lint,$(BIN)/ansible-lint --profile production)
# Plugin and role docs as the docsite builds them; its ansible-doc is the lint venv's.
lint-collection-docs:
	@$(call timed,lint-collection-docs,PATH=$(LINT_BIN):$$PATH $(LINT_BIN)/antsibull-docs lint-collection-docs --plugin-docs collections/ansible_collections/gpufleet/cloud)
lint-galaxy-importer:
	@$(call timed,lint-galaxy-importer,tools/galaxy-importer.sh)

sanity: venv collections sanity-venvs
	@$(call timed,sanity,tools/sanity.sh)

SCENARIO ?=
molecule: venv collections images prometheus-tools
	@$(call timed,molecule,MOLECULE_TIMES=$(MOLECULE_TIMES) tools/molecule-all.sh $(SCENARIO))

# LAB_JOBS=2 runs the lab tests on two pytest workers. Unsafe for now: the
# tests that share the lab fleet are marked xdist_group("lab-fleet"), yet one
# such run split them across workers, and the second worker's `lab up` took
# down the fleet the first was converging (docs/testing.md).
LAB_JOBS ?= 1
LAB_PYTEST = $(BIN)/pytest -q -p no:cacheprovider -m lab --durations=25
lab-test: venv collections images
	@$(call timed,lab-test,$(LAB_PYTEST) tests/integration $(if $(filter-out 1,$(LAB_JOBS)),-n $(LAB_JOBS) --dist loadgroup))

# The lab stage in two halves that share nothing, each its own pytest
# process (so no fixture or xdist group can be split between them): the
# shared lab fleet's modules, and every other lab test (storage, backup,
# driver upgrade, bad input, SSH lockout; free ports, uniquely named nodes).
# STAGES="... lab-fleet+lab-roles ..." runs them side by side.
# lab-roles runs its test files on LAB_ROLES_JOBS workers (--dist loadfile:
# a file's module-scoped node stays on one worker; the KMS image and the
# roles' bad-input run are made once and shared, storage_nodes.py and
# roles/bad_input.py). One worker drove one node at a time and was the
# longer half by 130 s. --no-loadscope-reorder keeps the files in the order
# tests/integration/conftest.py gives them (the longest first, the shared
# bad-input run's tests after them): pytest-xdist otherwise hands out the
# files with the most tests first, which put the bad-input tests first,
# waiting on the run.
LAB_ROLES_JOBS ?= 2
# The installed CLI's test (LAB_CLI_TESTS) has a one-node lab of its own
# with the shared fleet's container names and ports, so it must never run
# beside lab-fleet: `make test` runs it as the lab-cli stage, beside
# Molecule (STAGES), before the lab group; `make lab-test` runs it first
# (tests/integration/conftest.py). The guard's lab tests (LAB_GUARD_TESTS) share nothing with the fleet
# (their own nodes, ports and emulators), so they run in lab-roles: the
# fleet half is the longer one (1,162 s against 1,071 s, docs/test-times.md,
# before the pull-mode test joined it). As a third process beside the two
# halves the guard's tests took 1,148 s against 353 s alone, and slowed
# lab-fleet from about 830 s to 1,229 s: on two CPUs, three processes that
# converge nodes only wait on each other.
LAB_GUARD_TESTS = tests/integration/roles/guard/test_checkpoint_resume.py \
	tests/integration/roles/guard/test_triggers_per_cloud.py tests/integration/roles/guard/test_repair_ladder.py
LAB_FLEET_TESTS = tests/integration/test_pull_fleet.py tests/integration/test_lab.py tests/integration/test_drift.py
LAB_CLI_TESTS = tests/integration/test_installed_cli.py
.PHONY: lab-fleet lab-roles lab-guard lab-cli
lab-fleet: venv collections images
	@$(call timed,lab-fleet,$(LAB_PYTEST) $(call junit,lab-fleet) $(LAB_FLEET_TESTS))
lab-cli: venv collections images
	@$(call timed,lab-cli,$(LAB_PYTEST) $(call junit,lab-cli) $(LAB_CLI_TESTS))
# The guard's lab tests alone, for working on the guard.
lab-guard: venv collections images
	@$(call timed,lab-guard,$(LAB_PYTEST) $(LAB_GUARD_TESTS))
lab-roles: venv collections images
	@$(call timed,lab-roles,$(LAB_PYTEST) $(call junit,lab-roles) tests/integration $(addprefix --ignore=,$(LAB_FLEET_TESTS) $(LAB_CLI_TESTS)) \
	  $(if $(filter-out 1,$(LAB_ROLES_JOBS)),-n $(LAB_ROLES_JOBS) --dist loadfile --no-loadscope-reorder))

# ansible-inventory against the four cloud emulators (moto and loopback
# servers); needs no podman.
inventory-test: venv collections
	@$(call timed,inventory-test,$(BIN)/pytest tests/integration -q -p no:cacheprovider -m inventory $(call junit,inventory-test))

# The unit and inventory stages SOAK_RUNS times in a row, each time with
# two CPU-burning processes beside them: timing-dependent tests must wait on
# conditions, not on a quiet machine. Fails on the first failed run.
SOAK_RUNS ?= 5
.PHONY: soak
soak: venv collections
	@$(PYTHON) tools/soak.py --runs $(SOAK_RUNS) --burners 2 -- $(MAKE) --no-print-directory unit inventory-test

# Only on a machine with an NVIDIA GPU: converges this machine with the GPU
# roles (it installs a driver and may reboot) and runs the gpu-marked tests.
gpu: venv collections
	@$(call timed,gpu,$(BIN)/molecule test -s gpu)

# For a GPU machine lent for a few minutes, bare and offline: captures what
# nvidia-smi says and runs the parser and node_health's checks on it, reading
# only (see tools/gpu-probe --help). No venv: it needs Python 3 alone.
.PHONY: gpu-probe
gpu-probe:
	@test -n "$(OUT)" || { echo "usage: make gpu-probe OUT=DIR" >&2; exit 2; }
	tools/gpu-probe --out $(OUT)

# ---- benchmarks (never part of make test) ------------------------------
.PHONY: bench-inventory bench-fleet bench-revisions bench-molecule bench-interpreter bench-controller bench-pull bench-pull-node
bench-interpreter: venv collections images
	$(BIN)/python -m bench.interpreter
bench-controller: venv collections images
	$(BIN)/python -m bench.controller
bench-molecule: venv collections images
	$(BIN)/python -m bench.molecule
bench-inventory: venv collections
	$(BIN)/python -m bench.inventory
# gpufleet drift --from at 10,000 pull-mode node reports (PULL_NODES), from moto's S3.
PULL_NODES ?= 10000
bench-pull: venv collections
	$(BIN)/python -m bench.pull --nodes $(PULL_NODES)
# Takes over the lab fleet (gpufleet lab up -n 1) and leaves it at one node.
bench-pull-node: venv collections images
	$(BIN)/python -m bench.pull.node
# Takes over the lab fleet (gpufleet lab up -n 1, 4, 8) and leaves it at 8.
# FLEET_CONFIGS=gpufleet,defaults leaves out the linear-strategy runs.
FLEET_CONFIGS ?= gpufleet,linear,defaults
bench-fleet: venv collections images
	$(BIN)/python -m bench.fleet --configs $(FLEET_CONFIGS)
# This checkout against an older revision (BEFORE=<git rev>) on the lab as it
# is (up and converged): tasks evaluated and controller CPU of a no-op converge.
BEFORE ?= HEAD~1
bench-revisions: venv collections
	$(BIN)/python -m bench.fleet.revisions --before $(BEFORE)

# ---- execution environment (AWX, Ansible Automation Platform) ------------
# The collection goes in as the tarball `ansible-galaxy collection build`
# makes (build_ignore applied), under the fixed name execution-environment.yml
# copies, so the definition does not change with each version.
EE_DIR := build/ee
EE_TAG ?= gpufleet-ee:latest
.PHONY: ee-tarball ee-context ee-image
ee-tarball: venv
	rm -rf $(EE_DIR) && mkdir -p $(EE_DIR)
	$(BIN)/ansible-galaxy collection build --force --output-path $(EE_DIR) .
	mv $(EE_DIR)/gpufleet-cloud-*.tar.gz $(EE_DIR)/gpufleet-cloud.tar.gz
ee-context: ee-tarball
	$(BIN)/ansible-builder create -f execution-environment.yml -c $(EE_DIR)/context
# Pulls the base image and Galaxy collections: not possible on our machines.
ee-image: ee-tarball
	$(BIN)/ansible-builder build -f execution-environment.yml -c $(EE_DIR)/context -t $(EE_TAG) --container-runtime podman

# Re-resolve every Python dependency and pin the result.
.PHONY: lock
lock:
	rm -rf .cache/lock-venv && $(PYTHON) -m venv .cache/lock-venv
	.cache/lock-venv/bin/pip install --quiet --upgrade pip
	.cache/lock-venv/bin/pip install --quiet -e '.[test]'
	{ sed -n '1,2p' requirements/constraints.txt; .cache/lock-venv/bin/pip freeze --exclude-editable | grep -vi '^gpufleet'; } > requirements/constraints.new
	mv requirements/constraints.new requirements/constraints.txt
# The same for the lint venv (requirements/lint-venv.txt): its top-level
# pins are the versions this installs.
LINT_VENV_TOP := galaxy-importer==0.4.44 antsibull-docs==2.28.0 ansible-core==2.19.14 ansible-lint==26.10.1
.PHONY: lock-lint-venv
lock-lint-venv:
	rm -rf .cache/lock-lint-venv && $(PYTHON) -m venv .cache/lock-lint-venv
	.cache/lock-lint-venv/bin/pip install --quiet --upgrade pip
	.cache/lock-lint-venv/bin/pip install --quiet $(LINT_VENV_TOP)
	{ sed -n '/^#/p' requirements/lint-venv.txt; .cache/lock-lint-venv/bin/pip freeze; } > requirements/lint-venv.new
	mv requirements/lint-venv.new requirements/lint-venv.txt
