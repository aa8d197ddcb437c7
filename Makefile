# clawgym_ros: two commands on a fresh machine.
#   make demo   set everything up, then run the main job on the embedded default (MuJoCo + OMPL)
#   make test   set everything up, then run the test suite
# ROS 2 distro: ROS=jazzy (the LTS, default) or ROS=kilted, each from pinned PyPI wheels
# (requirements-ros-<distro>.txt) in its own venv: .venv (jazzy), .venv-kilted. With
# /opt/ros/<distro> sourced (ROS_DISTRO set) that system ROS is used, whatever ROS= says.
# Set-up is idempotent: stamp files in the venv make a second `make setup` take seconds.

SHELL := /bin/bash
PYTHON ?= python3
ROS_DEFAULT := jazzy
ROS_WHEEL_DISTROS := jazzy kilted
ifdef ROS_DISTRO
override ROS := $(ROS_DISTRO)
VENV_FLAGS := --system-site-packages
ROS_REQS_FILE :=
VENV_TAG := $(ROS)-system
else
ROS ?= $(ROS_DEFAULT)
ifeq ($(filter $(ROS),$(ROS_WHEEL_DISTROS)),)
$(error ROS=$(ROS) is not supported; allowed: $(ROS_WHEEL_DISTROS))
endif
VENV_FLAGS :=
ROS_REQS_FILE := requirements-ros-$(ROS).txt
VENV_TAG := $(ROS)-wheels
endif
VENV := $(CURDIR)/.venv$(if $(filter $(ROS),$(ROS_DEFAULT)),,-$(ROS))
PY := $(VENV)/bin/python
BUILD := $(CURDIR)/build/$(ROS)
STAMP_DEPS := $(VENV)/.stamp-deps
STAMP_IFACE := $(VENV)/.stamp-interfaces
STAMP_PKG := $(VENV)/.stamp-package
STAMP_PYC := $(VENV)/.stamp-bytecode
IFACE_SRC := $(shell find clawgym_interfaces -type f \( -name '*.msg' -o -name '*.srv' -o -name '*.action' -o -name 'CMakeLists.txt' -o -name 'package.xml' \))
# liburdfdom-tools (check_urdf) and libsdformat-dev (the SDFormat checker the tests build): the
# real parsers that check the robot descriptions and Gazebo worlds; chromium: the headless
# browser the tests drive the judgment page and the report page with.
APT_PACKAGES := cmake g++ make git pkg-config libegl1 libgl1 libegl-mesa0 libgles2 libosmesa6 \
  liburdfdom-tools libsdformat-dev chromium
# Named by the distro and the package list: a venv of another distro is rebuilt, and a longer
# package list is installed on the next `make setup`.
STAMP_APT := $(VENV)/.stamp-apt-$(VENV_TAG)-$(shell echo "$(APT_PACKAGES)" | md5sum | cut -c1-8)
# Interfaces for rclpy only (every node here is Python): no C++ type support and no
# optimization of the generated code (a handful of small messages). 3 min 11 s -> 1 min 19 s
# measured on 2 cores; colcon on a workstation builds the full package instead.
IFACE_FLAGS := -DCMAKE_BUILD_TYPE=None -DBUILD_TESTING=OFF -DCLAWGYM_INTERFACES_PYTHON_ONLY=ON
DEMO_OUT ?= runs/demo
PYTEST_ARGS ?=
# make test runs the suite in TEST_WORKERS pytest-xdist processes (each its own ROS domain, see
# test/conftest.py), a whole test file per worker at a time so module fixtures are built once:
# 1,032 s -> 639 s on the 2-core machine, idle. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

.PHONY: setup test demo lint bench clean interfaces

setup: $(STAMP_PKG) $(STAMP_PYC)

$(STAMP_APT):
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@# A venv made for another distro or install path (e.g. an older Kilted .venv) is rebuilt.
	@if [ -x $(PY) ] && [ "$$(cat $(VENV)/.ros-distro 2>/dev/null)" != "$(VENV_TAG)" ]; then \
	  echo "$(VENV) was set up for '$$(cat $(VENV)/.ros-distro 2>/dev/null || echo unknown)', not $(VENV_TAG): rebuilding it"; \
	  rm -rf $(VENV); \
	fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	@echo "$(VENV_TAG)" > $(VENV)/.ros-distro
	@touch $@

$(STAMP_DEPS): $(STAMP_APT) requirements.txt $(ROS_REQS_FILE)
	$(PY) -m pip install -q --disable-pip-version-check --no-compile \
	  $(if $(ROS_REQS_FILE),-r $(ROS_REQS_FILE)) -r requirements.txt
	@touch $@

$(STAMP_IFACE): $(STAMP_DEPS) $(IFACE_SRC)
	@rm -rf $(BUILD)/clawgym_interfaces && mkdir -p $(BUILD)/clawgym_interfaces
	cd $(BUILD)/clawgym_interfaces && \
	  AMENT_PREFIX_PATH="$(VENV)$${AMENT_PREFIX_PATH:+:$$AMENT_PREFIX_PATH}" PATH="$(VENV)/bin:$$PATH" \
	  cmake $(CURDIR)/clawgym_interfaces $(IFACE_FLAGS) \
	    "-DCMAKE_PREFIX_PATH=$(VENV)$${CMAKE_PREFIX_PATH:+;$$CMAKE_PREFIX_PATH}" \
	    -DCMAKE_INSTALL_PREFIX=$(VENV) -DPython3_EXECUTABLE=$(PY) > $(BUILD)/interfaces-configure.log \
	  || { cat $(BUILD)/interfaces-configure.log; exit 1; }
	cd $(BUILD)/clawgym_interfaces && PATH="$(VENV)/bin:$$PATH" \
	  $(MAKE) --no-print-directory -j2 install > $(BUILD)/interfaces-build.log 2>&1 \
	  || { tail -40 $(BUILD)/interfaces-build.log; exit 1; }
	$(PY) -c "import clawgym_interfaces.msg, clawgym_interfaces.srv, clawgym_interfaces.action"
	@touch $@

$(STAMP_PKG): $(STAMP_IFACE) setup.py setup.cfg package.xml $(wildcard clawgym_ros/nodes/*_node.py)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# The venv's bytecode, compiled once on all cores (again after the dependencies or the
# interfaces change; not after an edit of a node, which only reinstalls the package). pip
# installs with --no-compile (its serial compile is slower), and where PYTHONDONTWRITEBYTECODE
# is set (as on this project's CI machines) no import writes it either: every process then
# compiled torch & co. from source (import torch 5.9 s -> 3.0 s; the suite's node and worker
# processes each paid it). A file that does not compile (torch's tests for newer Pythons)
# compiles at import as before; the log lists them.
$(STAMP_PYC): $(STAMP_IFACE)
	@mkdir -p $(BUILD)
	@$(PY) -m compileall -q -j0 $$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
	  > $(BUILD)/bytecode.log 2>&1 || echo "bytecode: $$(grep -c '^\*\*\* Error compiling' $(BUILD)/bytecode.log)" \
	  "file(s) left to compile at import ($(BUILD)/bytecode.log)"
	@touch $@

interfaces: $(STAMP_IFACE)

test: setup
	$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check clawgym_ros test launch setup.py

demo: setup
	$(VENV)/bin/clawgym demo --out $(DEMO_OUT)

bench: setup
	$(VENV)/bin/clawgym bench sim --json

clean:
	rm -rf $(BUILD) $(VENV) *.egg-info
