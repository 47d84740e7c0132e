# litgrad -- the one entry point: build, run, test, weave.
#
#   make                  install missing tools, build every stage program, capture each
#                         program's output, draw the charts, weave build/pdf/*.pdf
#   make test             lint, build every stage's tests, then for every stage N in order
#                         run the tests of stages 01..N against it; one summary at the end
#   make test-quick       the same, but stage N runs only its own tests and the tests every
#                         program takes: each test once (about a sixth of the runs)
#   make test-stage N     the tests of stages 01..N against stage N  (also: N=... form);
#                         TEST=NAME runs only the test NAME (as an exercise names it)
#   make run-stage N      run build/bin/stage-NN with ARGS="..."
#   make diff-stage N     build/diff/stage-NN.diff: the tangled tree of the stage before N
#                         to stage N's, as a unified diff
#   make html             the web edition: build/html/index.html (tools/nwhtml), from the
#                         same .nw files and captured outputs as the PDF
#   make html-check       read every page of it in headless Chromium (tests/html/check.mjs);
#                         make test does this too where Chromium is installed
#   make stages | pdf | lint | bench | clean
#   make program-share    the programs' share of the last stage's tangled lines
#   make chunkstats       the main line's share of code in step-named chunks, long chunks;
#                         the tangled C's figures (indentation, include graph, globals, names)
#   make bookstats        how the woven book reads: pages by part, mostly-code pages, index
#   make crosscheck       install PyTorch (tools/install-deps crosscheck; make installs it too) and
#                         compare litgrad with it: Appendix A's table, also in the book
#   make solutions        the appendix "Solutions" alone: build/pdf/solutions.pdf (the book
#                         and the web edition hold it too)
#   make check-solutions  apply each code-changing exercise's solution (solutions/*.patch)
#                         on a scratch tree and check that its named tests react as stated;
#                         UPDATE=1 writes solutions/results/; SOLUTION=NN-K checks one
#   make SAN=1 ...        the same with -fsanitize=address,undefined (build/san/;
#                         with CC=clang, build/san-clang/)
#   make machine-check    the chapters that quote benchmarks, built from a clone at a path
#                         of 150 characters with a processor's name of 150 (CI runs it)
#   make readme-check     run the README's commands (CI runs it)
#   make V=1 ...          print every command in full instead of one line per step
#   make fuzz             every libFuzzer target tests/fuzz/fuzz_*.c, FUZZ_SECONDS each
#                         (see "fuzzing" below); make test runs their regression inputs
#
# Stage N's code is notangle over stages/stage_01*.nw .. stage_NN*.nw; gaps in the
# numbering are fine. See README.md and docs/building.md.

# make with no goal builds everything (all, below); an included file of rules, such as
# build/solutions.mk, must not become the default.
.DEFAULT_GOAL := all

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDEXPANSION:
MAKEFLAGS += --no-builtin-rules
# What make prints: one short line per step, as "  CC      stage_07/model.o" (tools/cc-once
# prints a compile, not an object copied from its cache), with the step's place among
# its kind where the total is known ("(7/14)"); a step of a second or two that a longer
# one follows (a chapter's weave before its PDF, a solution's run) prints no line. make V=1 prints every command in full
# instead. A command that fails is printed in full either way (tools/make-shell runs the
# recipes of a quiet make), and a step that writes a log prints the log's last lines.
V ?= 0
ifeq ($(V),1)
Q :=
step = @:
else
Q := @
step = @printf '  %-7s %s\n' '$(1)' '$(2)'
%: SHELL := tools/make-shell
export LG_QUIET := 1
endif
# make uses every core: -j as many jobs as the machine has cores, unless the command line
# says otherwise (make -j1, make -j4: the command line wins). A sub-make ($(MAKE), as make
# test runs) shares its parent's jobs instead of adding its own. Each line of a recipe
# prints its output in one piece (--output-sync=line), so that jobs do not interleave
# within a line.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1) --output-sync=line
endif

CC := gcc
WARNINGS := -std=c11 -Wall -Wextra -Wpedantic -Werror
# clang contracts a * b + c into one fused operation under -std=c11 (gcc does not: ISO C
# mode turns it off), and folds such constants fused: the book's numbers are unfused.
CC_IS_CLANG := $(findstring clang,$(notdir $(CC)))
WARNINGS += $(if $(CC_IS_CLANG),-ffp-contract=off)
SANITIZERS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The test files are compiled without optimisation: they are the largest translation
# units (Criterion's macros), compiled once for every stage whose headers they see
# changed, and their own code is not what runs long (the library's, at -O2, is). The
# warnings that need the optimiser (-Wmaybe-uninitialized) still see them under SAN=1,
# which CI runs.
# The programs are linked statically, except under SAN=1 (the sanitizers' runtime needs
# the shared C library): the tests start them several thousand times, and a dynamic
# program's start (mapping zlib, Nettle, libm and the C library, relocating them) cost
# here about twice that of a static one.
ifeq ($(SAN),1)
# One directory per compiler: make SAN=1 CC=clang test builds under build/san-clang/.
B := build/san$(if $(filter-out gcc,$(notdir $(CC))),-$(notdir $(CC)))
CFLAGS := $(WARNINGS) -O1 -g $(SANITIZERS)
TEST_CFLAGS := $(CFLAGS)
PROGRAM_LDFLAGS :=
else
B := build
CFLAGS := $(WARNINGS) -O2 -g
TEST_CFLAGS := $(WARNINGS) -O0 -g
PROGRAM_LDFLAGS := -static
endif
LDLIBS := -lz -lnettle -lm
T := build/tangle

# ---- the stages ---------------------------------------------------------------------
NW := $(sort $(wildcard stages/stage_[0-9][0-9]_*.nw))
# Appendix A is tangled with every stage and woven after them (see "Appendix A" below).
APPENDIX := stages/appendix_a_crosscheck.nw
# The appendix "Solutions" (see "the solutions" below): its files, the patches it prints,
# and the program runs it quotes (SOL_RUNS, from build/solutions.mk).
SOLUTIONS := $(sort $(wildcard solutions/solutions_[0-9][0-9].nw)) $(wildcard solutions/solutions_A.nw)
SOL_PATCHES := $(sort $(wildcard solutions/*.patch))
# (SOL_VERDICTS is defined here, before the rules of the PDFs name it as a prerequisite.)
SOL_VERDICTS := $(foreach p,$(SOL_PATCHES),build/results/solution-$(basename $(notdir $(p)))-verdict.txt)
SOL_SHOWN := $(foreach p,$(SOL_PATCHES),build/results/solution-$(basename $(notdir $(p))).patch \
               build/results/solution-$(basename $(notdir $(p)))-patch.tex \
               build/results/solution-$(basename $(notdir $(p)))-result.txt)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include build/solutions.mk
endif
SOL_ALL := $(SOL_SHOWN) $(SOL_RUNS)
num = $(word 2,$(subst _, ,$(notdir $(1))))
STAGES := $(foreach f,$(NW),$(call num,$f))
# " (7/14)": stage $1's place among the stages, for make's step lines.
of_stages = ($(words $(call nums_upto,$(1)))/$(words $(STAGES)))
# the .nw files of stages 01..$1, in order (two-digit numbers sort as text)
upto = $(foreach f,$(NW),$(if $(filter $(call num,$f),$(firstword $(sort $(call num,$f) $(1)))),$f))
nums_upto = $(foreach f,$(call upto,$(1)),$(call num,$f))
tests_upto = $(foreach n,$(call nums_upto,$(1)),$(wildcard tests/test_stage_$(n)_*.c))
bins_upto = $(foreach n,$(call nums_upto,$(1)),$(B)/bin/stage-$(n))
figures_of = $(shell sed -n 's/^% litgrad-figures://p' stages/stage_$(1)_*.nw)
FIG_STAGES := $(foreach n,$(STAGES),$(if $(call figures_of,$(n)),$(n)))

BINS := $(foreach n,$(STAGES),$(B)/bin/stage-$(n))
TESTBINS := $(foreach n,$(STAGES),$(B)/test/stage-$(n))
RESULTS := $(foreach n,$(STAGES),build/results/stage-$(n).txt build/results/stage-$(n)-tests.tex \
                                 build/results/stage-$(n)-adds.tex)
FIGSTAMPS := $(foreach n,$(FIG_STAGES),build/fig/stage_$(n)/.done)
PDFS := build/pdf/book.pdf build/pdf/programs.pdf $(foreach n,$(STAGES),build/pdf/stage-$(n).pdf) build/pdf/solutions.pdf

.PHONY: all stages pdf html html-check test test-quick test-stage test-bins run-stage diff-stage lint bench clean deps \
        crosscheck program-share fuzz fuzz-regressions chunkstats solutions check-solutions machine-check readme-check bookstats
all: stages $(TESTBINS) pdf html
stages: $(BINS)
pdf: $(PDFS)

# ---- tools: install what is missing, and say so --------------------------------------
TOOLS := gcc clang notangle noweave noroots cpif gnuplot dot pdflatex bibtex pdftoppm pdftotext pandoc
deps:
	@missing=""; \
	for t in $(TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -f /usr/include/criterion/criterion.h ] || missing="$$missing criterion"; \
	[ -f /usr/include/pb.h ] || missing="$$missing libnanopb-dev"; \
	[ -f /usr/include/zlib.h ] || missing="$$missing zlib1g-dev"; \
	[ -f /usr/include/nettle/sha2.h ] || missing="$$missing nettle-dev"; \
	if command -v kpsewhich >/dev/null 2>&1; then \
	  for s in noweb.sty natbib.sty plainnat.bst lmodern.sty booktabs.sty fancyvrb.sty hyperref.sty \
	           microtype.sty geometry.sty upquote.sty needspace.sty fancyhdr.sty etoolbox.sty; do \
	    [ -n "$$(kpsewhich $$s)" ] || missing="$$missing $$s"; done; fi; \
	if [ -n "$$missing" ]; then \
	  echo "litgrad: missing:$$missing -- running tools/install-deps"; tools/install-deps; fi
	@# Appendix A's table needs PyTorch; a machine that cannot have it builds the book without
	@# the table (tried once: build/.no-torch), and the appendix says so.
	@if [ ! -f $(TORCH) ] && [ ! -f build/.no-torch ]; then \
	  echo "litgrad: PyTorch, for Appendix A's table, is missing -- running tools/install-deps crosscheck"; \
	  tools/install-deps crosscheck || { mkdir -p build && touch build/.no-torch; \
	    echo "litgrad: PyTorch could not be installed: the book is built without Appendix A's table" >&2; }; fi

# ---- tangle, compile, link -------------------------------------------------------------
# The tangled tree of a stage is the same with and without SAN, so it lives outside $(B).
TANGLED := $(foreach n,$(STAGES),$(T)/stage_$(n)/.tangled)
LIBS := $(foreach n,$(STAGES),$(B)/obj/stage_$(n)/lib.a)

# Pattern rules are static (limited to the stages that exist), so that a request for a
# stage that does not exist is an error instead of a tangle of the stages below it.
$(TANGLED): $(T)/stage_%/.tangled: $$(call upto,$$*) tools/nwtangle tools/nwcheck | deps
	$(call step,TANGLE,stage $* $(call of_stages,$*))
	$(Q)tools/nwtangle $(@D) $(call upto,$*)
	$(Q)touch $@

# Every tangled .c file except the stage programs' mains forms the stage's library. The
# files are the roots the stages declare on their "% litgrad-roots:" lines (tools/nwcheck
# proves the list complete), so the objects are known before anything is tangled. Each
# object is compiled on its own and depends on its .c file and, through the compiler's
# -MMD list, on the headers it includes: a file that nwtangle left untouched (its text
# did not change) keeps its time stamp, and its object is not compiled again.
roots_of = $(shell sed -n 's/^% litgrad-roots://p' $(call upto,$(1)))
lib_objs = $(patsubst %.c,$(B)/obj/stage_$(1)/%.o,$(filter-out stage-%.c,$(filter %.c,$(call roots_of,$(1)))))
test_objs = $(patsubst tests/%.c,$(B)/testobj/stage_$(1)/%.o,$(call tests_upto,$(1)))

# A tangled file is made by its stage's tangle; the empty recipe lets make look at its
# time stamp again afterwards instead of assuming that it changed.
$(T)/%.c: $$(@D)/.tangled ;
$(T)/%.h: $$(@D)/.tangled ;
# .changed: touched by nwtangle only when a file of the tree (or its code chunks) changed.
$(T)/%/.changed: $(T)/%/.tangled ;

# An object is compiled by tools/cc-once, which compiles each distinct text once: a file
# that stage N's tree holds unchanged from stage N-1 (same text, same headers) is copied
# from $(B)/objcache. __FILE__ leaves out the stage's directory, so that an assert in a
# header does not make every stage's object different.
CC_ONCE = tools/cc-once $(B)/objcache $@ $(1) $(CC) $(or $(2),$(CFLAGS)) -fmacro-prefix-map=$(1)/= -I$(1)

# A path as a C string literal in one shell word: its \ and " escaped for C, then the
# whole quoted for the shell, so that a clone builds under any directory name.
c_string_word = '"$(subst ','\'',$(subst ",\",$(subst \,\\,$(1))))"'
# Any text as one single-quoted shell word.
c_shell_word = '$(subst ','\'',$(1))'
DATA_DIR_DEFINE = -DLG_DATA_DIR=$(call c_string_word,$(CURDIR)/data)

$(B)/obj/%.o: $(T)/%.c tools/cc-once
	$(Q)$(call CC_ONCE,$(<D)) $(DATA_DIR_DEFINE) $<

# Stage 14's kernels are compiled with the loop vectorizer on (-O3: gcc's -O2 vectorizes
# only loops whose trip count it knows) and, on every compiler, without fused
# multiply-adds: a kernel must round each product before its sum, as the tape does.
# gcc's cheapest cost model has no clang spelling; clang's vectorizer needs none.
$(B)/obj/%/kernel.o: CFLAGS += -O3 $(if $(CC_IS_CLANG),,-fvect-cost-model=very-cheap) \
                               -fno-trapping-math -ffp-contract=off

# The tests of stage M compiled against stage N's headers (they may run the stage
# programs, found through LG_BIN_DIR). What differs by stage N is the headers; the stage
# itself is named in a separate object (tests/lg_stage.c), so that a test file whose
# headers did not change is compiled once for all the stages after its own.
$(B)/testobj/%.o: tests/$$(notdir $$*).c tests/litgrad_test.h tools/cc-once \
                  | $(T)/$$(dir $$*).tangled
	$(Q)$(call CC_ONCE,$(T)/$(patsubst %/,%,$(dir $*)),$(TEST_CFLAGS)) -Itests \
	  -DLG_BIN_DIR=$(call c_string_word,$(CURDIR)/$(B)/bin) $<

$(B)/testobj/stage_%/lg_stage.o: tests/lg_stage.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(TEST_CFLAGS) -DLG_STAGE='"$*"' -c $< -o $@

-include $(wildcard $(B)/obj/*/*.d $(B)/testobj/*/*.d $(B)/xcobj/*.d)

$(LIBS): $(B)/obj/stage_%/lib.a: $$(call lib_objs,$$*)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BINS): $(B)/bin/stage-%: $(B)/obj/stage_$$*/stage-$$*.o $(B)/obj/stage_%/lib.a
	$(call step,LD,bin/stage-$*)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(PROGRAM_LDFLAGS) -o $@ $^ $(LDLIBS)

# Criterion re-executes the test binary for every test, so what the binary loads at
# start is paid about two thousand times by make test. It is linked statically, and
# without libgit2, which it uses only to draw diffs that litgrad's assertions never ask
# for: tests/criterion_nodiff.c says why and what replaces them. zlib and Nettle are
# linked statically too, the binary is not position-independent (nothing of its own to
# relocate at start), and its calls into the shared libraries are bound once at start
# (-z now) rather than each on its first call in every test. Left dynamic: nanomsg (Debian
# ships no static archive of it), and with it the C library and libm.
CRITERION := $(B)/testobj/criterion_nodiff.o -Wl,-Bstatic -lcriterion -lprotobuf-nanopb \
  -lboxfort -lffi -Wl,-Bdynamic -lnanomsg -pthread -lrt
TEST_LDLIBS := -Wl,-Bstatic -lz -lnettle -Wl,-Bdynamic -lm

$(B)/testobj/criterion_nodiff.o: tests/criterion_nodiff.c
	$(call step,CC,criterion_nodiff.o)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The tests of stages 01..N, linked against stage N's library.
$(TESTBINS): $(B)/test/stage-%: $$(call test_objs,$$*) $(B)/testobj/stage_%/lg_stage.o \
                   $(B)/obj/stage_%/lib.a $(B)/testobj/criterion_nodiff.o $$(call bins_upto,$$*) | deps
	$(call step,LD,test/stage-$*)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -no-pie -Wl,-z,now -o $@ $(call test_objs,$*) \
	  $(B)/testobj/stage_$*/lg_stage.o $(B)/obj/stage_$*/lib.a $(CRITERION) $(TEST_LDLIBS)

# ---- tests -------------------------------------------------------------------------------
ifneq ($(filter test-stage run-stage,$(MAKECMDGOALS)),)
STAGE_ARG := $(filter-out test-stage run-stage,$(MAKECMDGOALS))
ifneq ($(STAGE_ARG),)
N := $(firstword $(STAGE_ARG))
$(eval $(STAGE_ARG):;@:)
endif
endif
NN := $(shell n='$(N)'; [[ $$n =~ ^[0-9]{1,2}$$ ]] && printf '%02d' $$((10#$$n)))
ifneq ($(filter test-stage run-stage,$(MAKECMDGOALS)),)
ifeq ($(N),)
$(error usage: make test-stage N  (or run-stage N); the stages are: $(STAGES))
endif
ifeq ($(filter $(NN),$(STAGES)),)
$(error no stage '$(N)'; the stages are: $(STAGES))
endif
endif

# OWN=1 (as make test-quick sets it): only stage N's own tests and the tests that every program
# takes (stage01/every_program_*, run against build/bin/stage-NN).
test-stage: $(B)/test/stage-$(NN)
	@tools/run-tests $(NN) $(B)/test/stage-$(NN) $(B)/log $(if $(filter 1,$(OWN)),own)

# make test runs, for every stage N, the tests of stages 01..N against stage N's code: the
# book's promise that a later stage never breaks an earlier contract, checked at every
# stage (what make test-stage N does for one stage). make test-quick runs each test once,
# against its own stage's code, and the tests every program takes (Stage 01's
# command-line and allocation-walk rules) against every program: stage N's binary runs
# stage N's tests (OWN=1); about a sixth of the test runs, for the edit-test loop.
test: lint
	+@$(call run_tests,$(STAGES),); ok=0; tools/test-summary $(B)/log $(STAGES) || ok=1; \
	  $(MAKE) --no-print-directory SAN=$(SAN) fuzz-regressions || ok=1; \
	  if [ "$(SAN)" = 1 ]; then \
	    echo "html: the web edition is read in a browser by make test, not under SAN=1" \
	      "(sanitizers check the C code; the pages are the same)"; \
	  elif [ -x $(CHROMIUM) ] && command -v node >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory html-check || ok=1; \
	  else echo "html: no Chromium ($(CHROMIUM)) or no node: the web edition was not read in a browser" \
	    "(tools/install-deps installs them)"; fi; exit $$ok

test-quick: lint
	+@$(call run_tests,$(STAGES),1); tools/test-summary $(B)/log $(STAGES)

# run_tests STAGES OWN: build the stages' test binaries in one make (-k: one that does not
# build does not stop the others), then run each stage's tests, going on after a failure.
# If a binary did not build, make test-stage N builds and tests each stage on its own
# instead, so that a stale binary is never run and the stage that failed is named. (One
# make instead of one per stage: each reads the Makefile and checks the whole tree again,
# about a second of CPU each.)
run_tests = mkdir -p $(B)/log && rm -f $(addprefix $(B)/log/stage-,$(addsuffix .*,$(1))); \
	if $(MAKE) --no-print-directory -k SAN=$(SAN) test-bins TEST_STAGES='$(1)'; then \
	  for n in $(1); do \
	    tools/run-tests $$n $(B)/test/stage-$$n $(B)/log $(if $(filter 1,$(2)),own) || :; done; \
	else \
	  for n in $(1); do \
	    if $(MAKE) --no-print-directory test-stage N=$$n SAN=$(SAN) OWN=$(2); then :; else \
	      [ -f $(B)/log/stage-$$n.status ] || echo "build failed" > $(B)/log/stage-$$n.status; fi; \
	  done; \
	fi

# The test binaries of TEST_STAGES, for run_tests: a goal of its own, so that make does
# not print "is up to date" for each binary that is.
test-bins: $(foreach n,$(TEST_STAGES),$(B)/test/stage-$(n))
	@:

run-stage: $(B)/bin/stage-$(NN)
	@$(B)/bin/stage-$(NN) $(ARGS)

lint: $(TANGLED) | deps
	@tools/nwcheck lint $(NW) $(APPENDIX)
	@tools/codestats --check $(T)
	@tools/program-share --check $(T)/stage_$(lastword $(STAGES))
	@tools/nwcheck roots $(NW) $(APPENDIX)
	@tools/chunkstats --check $(NW) $(APPENDIX)
	@tools/check-exercises $(NW) $(APPENDIX)
	@tools/check-glossary docs/glossary.tex $(NW)
	@tools/readme-commands lint README.md .ci/run
	@for n in $(STAGES); do \
	  tools/nwcheck roots $$(printf '%s\n' $(NW) | awk -v n=$$n '{ split($$0, p, "_"); if (p[2] + 0 <= n + 0) print }'); \
	  ls tests/test_stage_$${n}_*.c >/dev/null 2>&1 || { echo "lint: stage $$n has no tests/test_stage_$${n}_*.c" >&2; exit 1; }; \
	done
	@for t in tests/test_stage_*.c; do n=$$(basename $$t | cut -d_ -f3); \
	  ls stages/stage_$${n}_*.nw >/dev/null 2>&1 || { echo "lint: $$t has no stage $$n" >&2; exit 1; }; done
	@echo "lint: clean ($(words $(NW)) stage files: $(STAGES); appendix: $(notdir $(APPENDIX)))"

# How the book reads: its pages by part, the main line's pages that are mostly code, the
# subject index's entries (tools/bookstats, on the two volumes make builds).
bookstats: build/pdf/book.pdf build/pdf/programs.pdf
	@tools/bookstats build/pdf/book.pdf build/pdf/programs.pdf

# Does the main line read as steps? The share of its code lines in chunks named as steps
# (not after a file or module) and its chunks over 40 lines (tools/chunkstats). Does the
# tangled C of the last stage read as C? Its indentation, its #line directives, the
# include graph of its modules, its globals and names (tools/codestats; LIST=1 names each).
chunkstats: $(TANGLED)
	@tools/chunkstats $(NW) $(APPENDIX)
	@tools/codestats $(if $(LIST),--list) $(T)

# ---- the book ------------------------------------------------------------------------
RESULT_TXT := $(foreach n,$(STAGES),build/results/stage-$(n).txt)
RESULT_TESTS := $(foreach n,$(STAGES),build/results/stage-$(n)-tests.tex)

$(RESULT_TXT): build/results/stage-%.txt: $(B)/bin/stage-%
	$(call step,RUN,stage-$* > results/stage-$*.txt)
	$(Q)mkdir -p $(@D)
	$(Q)$< > $@

# "Stage NN: X tests; tests of stages 01..NN: Y", from the test binary's own list.
$(RESULT_TESTS): build/results/stage-%-tests.tex: $(B)/test/stage-%
	$(Q)mkdir -p $(@D)
	$(Q)$< --list | awk -v n=$* ' \
	  /^stage[0-9][0-9]: [0-9]+ tests?$$/ { c = $$2 + 0; all += c; if ($$1 == "stage" n ":") own = c } \
	  END { printf "\\lgtestcount{%s}{%d}{%d}\n", n, own, all }' > $@

# "What this stage adds": from the .nw files of stages 01..N and the tangled trees of the
# stage before N and of N (tools/stage-adds).
prev_of = $(lastword $(filter-out $(1),$(call nums_upto,$(1))))
RESULT_ADDS := $(foreach n,$(STAGES),build/results/stage-$(n)-adds.tex)
$(RESULT_ADDS): build/results/stage-%-adds.tex: $(T)/stage_%/.changed \
                   $$(foreach p,$$(call prev_of,$$*),$(T)/stage_$$(p)/.changed) tools/stage-adds
	$(Q)mkdir -p $(@D)
	$(Q)tools/stage-adds $* $(T) $(call upto,$*) > $@

# make diff-stage N: the unified diff of the tangled tree of the stage before N to
# Stage N's, without #line directives (they only point into the .nw files).
ifneq ($(filter diff-stage,$(MAKECMDGOALS)),)
DIFF_ARG := $(filter-out diff-stage,$(MAKECMDGOALS))
ifneq ($(DIFF_ARG),)
N := $(firstword $(DIFF_ARG))
$(eval $(DIFF_ARG):;@:)
endif
DIFF_NN := $(shell n='$(N)'; [[ $$n =~ ^[0-9]{1,2}$$ ]] && printf '%02d' $$((10#$$n)))
ifeq ($(filter $(DIFF_NN),$(STAGES)),)
$(error usage: make diff-stage N, where N is a stage: $(STAGES))
endif
DIFF_PREV := $(call prev_of,$(DIFF_NN))
endif
diff-stage: $(T)/stage_$(DIFF_NN)/.tangled $(if $(DIFF_PREV),$(T)/stage_$(DIFF_PREV)/.tangled)
	@mkdir -p build/diff && rm -rf build/diff/a build/diff/b && mkdir -p build/diff/a build/diff/b
	@if [ -n '$(DIFF_PREV)' ]; then \
	  for f in $(T)/stage_$(DIFF_PREV)/*; do grep -v '^#line ' "$$f" > build/diff/a/$$(basename "$$f") || true; done; fi
	@for f in $(T)/stage_$(DIFF_NN)/*; do grep -v '^#line ' "$$f" > build/diff/b/$$(basename "$$f") || true; done
	@out=build/diff/stage-$(DIFF_NN).diff; \
	(cd build/diff && { diff -ruN a b || [ $$? -eq 1 ]; }) > $$out.tmp && \
	  sed -E 's/^((---|\+\+\+) [^\t]*)\t.*/\1/' $$out.tmp > $$out && rm -f $$out.tmp || exit 1; \
	rm -rf build/diff/a build/diff/b; \
	echo "wrote $$out: the tangled tree of stage $(if $(DIFF_PREV),$(DIFF_PREV),(none)) to stage $(DIFF_NN)," \
	  "$$(grep -c '^+++ ' $$out) files, +$$(grep -c '^+[^+]' $$out) -$$(grep -c '^-[^-]' $$out) lines"

# A drawing is rendered without the PDF's default half-inch margin (-Gmargin=0), so that
# its natural size is the drawing's own: tools/bookcheck compares it with its placed size.
$(FIGSTAMPS): build/fig/stage_%/.done: $(B)/bin/stage-% $(T)/stage_%/.changed
	$(call step,FIGURES,stage $*)
	$(Q)rm -rf $(@D) && mkdir -p $(@D)
	$(Q)$< --figure-data $(@D) > /dev/null
	$(Q)for f in $(call figures_of,$*); do \
	  if [ -f $(T)/stage_$*/$$f.gp ]; then \
	    cp $(T)/stage_$*/$$f.gp $(@D)/ && (cd $(@D) && gnuplot $$f.gp); \
	  elif [ -f $(@D)/$$f.dot ]; then dot -Gmargin=0 -Tpdf $(@D)/$$f.dot -o $(@D)/$$f.pdf; \
	  else echo "figure $$f of stage $*: neither $$f.gp nor $$f.dot was made" >&2; exit 1; fi; \
	done
	$(Q)touch $@
# Stage 14's roofline (fig-14-roofline.gp) reads the roofs and the kernels' points from the
# benchmark's captured output, so that the figure shows the run the chapter prints.
build/fig/stage_14/.done: build/results/bench-14.txt

# The book's own drawings (the map of the stages in the preface): docs/figures/*.dot, drawn
# like a stage's graphviz figure, with the .dot beside the PDF for tools/bookcheck.
BOOK_FIGS := $(patsubst docs/figures/%.dot,build/fig/book/%.pdf,$(wildcard docs/figures/*.dot))
$(BOOK_FIGS): build/fig/book/%.pdf: docs/figures/%.dot | deps
	$(call step,DOT,$(@F))
	$(Q)mkdir -p $(@D)
	$(Q)cp $< $(@D)/$*.dot && dot -Gmargin=0 -Tpdf $< -o $@

TEXENV := TEXINPUTS=.:../../docs//:../results//:../fig//: BIBINPUTS=../../docs:
# docs/litgrad.bib is among them: an edited entry rebuilds every PDF that cites (the
# book, the companion, each stage's), and tools/texpdf reruns bibtex when the .bib changes.
DOCS := $(wildcard docs/*.tex docs/*.bib)
# tools/texpdf runs pdflatex (and bibtex) until the references are stable; it is given the
# .tex files each document inputs, whose citations make its first bibliography.
BOOK_TEX := docs/preamble.tex docs/book-master.tex docs/preface.tex docs/glossary.tex
STAGE_TEX := docs/preamble.tex docs/stage-master.tex docs/alone-note.tex

# Every pass of pdflatex starts from a format that holds the class and docs/preamble.tex
# already loaded (docs/preamble-format.ltx): loading them is about half of a pass of a
# stage printed alone. It is made again when the preamble or the system's LaTeX format
# changes.
PREAMBLE_FMT := build/tex/lgpreamble.fmt
TEXPDF_FMT := -fmt $(basename $(notdir $(PREAMBLE_FMT)))
$(PREAMBLE_FMT): docs/preamble.tex docs/preamble-format.ltx $(shell kpsewhich -engine=pdftex pdflatex.fmt) | deps
	$(call step,FORMAT,$(@F): the preamble loaded once)
	$(Q)mkdir -p $(@D)
	$(Q)cd $(@D) && $(TEXENV) pdflatex -ini -interaction=nonstopmode -halt-on-error \
	  -jobname=$(basename $(@F)) '&pdflatex' preamble-format.ltx > $(basename $(@F)).ini.log 2>&1 \
	  || { tail -n 20 $(basename $(@F)).log; exit 1; }

# noweave's pipeline with the index, and tools/nwrefs around noidx so that only real
# uses are linked and counted: markup | finduses | nwrefs uses | noidx | nwrefs selfuses
# | nwprogram | totex. ("-indexfrom /dev/null" adds noidx and tells totex to write the
# index; its finduses, given no names, only copies the stream.) tools/nwprogram, last,
# moves each stage's plumbing (its "% litgrad-program" parts) to the appendix "The stage
# programs", after every reference has been computed on the files as written.
WEAVE := noweave -n -filter finduses -filter 'tools/nwrefs uses' -indexfrom /dev/null \
  -filter 'tools/nwrefs selfuses' -filter tools/nwprogram
WEAVE_TOOLS := build/tex/.nwrefs-checked tools/nwprogram

# tools/nwrefs-check: nwrefs on a small file whose real uses are known.
build/tex/.nwrefs-checked: tools/nwrefs tools/nwrefs-check | deps
	$(Q)mkdir -p $(@D)
	$(Q)tools/nwrefs-check
	$(Q)touch $@

# The two volumes are woven in one run, so that the references span both, and cut where
# the companion begins (tools/volsplit).
build/tex/book-body.tex build/tex/programs-body.tex &: $(NW) $(APPENDIX) $(SOLUTIONS) $(WEAVE_TOOLS) tools/volsplit
	$(call step,WEAVE,book and companion)
	$(Q)mkdir -p $(@D)
	$(Q)$(WEAVE) $(NW) $(APPENDIX) $(SOLUTIONS) > build/tex/woven.tex
	$(Q)tools/volsplit build/tex/woven.tex build/tex/book-body.tex build/tex/programs-body.tex

STAGE_BODIES := $(foreach n,$(STAGES),build/tex/stage-$(n)-body.tex)
$(STAGE_BODIES): build/tex/stage-%-body.tex: $$(wildcard stages/stage_$$*_*.nw) $(WEAVE_TOOLS)
	$(Q)mkdir -p $(@D)
	$(Q)$(WEAVE) $< > $@

# The numbers a chapter quotes with \lgv{NAME}, read from the captured outputs named on
# its "% litgrad-value: NAME FILE REGEX" lines (tools/lgvalues). FILE is a file of
# build/results/ (an output, or stage-NN-tests.tex, the test counts) or of the stage's
# figure directory; either way the values are read again when it is made again.
# Appendix A's are "stage A".
value_files = $(shell sed -n 's/^% litgrad-value: *[^ ]* *\([^ ]*\) .*/\1/p' $(1))
value_deps = $(sort $(foreach f,$(call value_files,$(2)),$(if $(filter stage-%.txt stage-%-tests.tex bench-%.txt crosscheck.txt,$(f)),build/results/$(f),build/fig/stage_$(1)/.done)))
VALUES := $(foreach n,$(STAGES),build/results/stage-$(n)-values.tex)
$(VALUES): build/results/stage-%-values.tex: $$(wildcard stages/stage_$$*_*.nw) \
                 $$(call value_deps,$$*,$$(wildcard stages/stage_$$*_*.nw)) tools/lgvalues
	$(Q)mkdir -p $(@D)
	$(Q)tools/lgvalues $* $(wildcard stages/stage_$*_*.nw) > $@.tmp && mv $@.tmp $@
build/results/stage-A-values.tex: $(APPENDIX) $$(call value_deps,A,$(APPENDIX)) tools/lgvalues
	$(Q)mkdir -p $(@D)
	$(Q)tools/lgvalues A $(APPENDIX) > $@.tmp && mv $@.tmp $@
build/results/all-values.tex: $(VALUES) build/results/stage-A-values.tex build/results/solutions-values.tex
	$(Q)cat $^ > $@

# The captured files a stage quotes with \lgoutput{bench-NN...}.
bench_quoted = $(sort $(patsubst %,build/results/%.txt,$(shell sed -n 's/.*\\lgoutput{\(bench-[0-9a-z-]*\)\.txt}.*/\1/p' $(1))))

# The book and its companion, typeset together (tools/texpair): each reads the other's
# labels, so that a chunk reference into the other volume prints its page (the
# companion's are P1, P2, ...).
build/pdf/book.pdf build/pdf/programs.pdf &: build/tex/book-body.tex build/tex/programs-body.tex $(DOCS) $(RESULTS) \
                    $(FIGSTAMPS) $(BOOK_FIGS) $(call bench_quoted,$(NW)) \
                    build/results/crosscheck.txt build/results/all-values.tex $(PREAMBLE_FMT) \
                    $(SOL_ALL) $(SOL_VERDICTS) build/results/solution-outcomes.tex \
                    tools/bookcheck tools/texpdf tools/texpair tools/texlabels tools/numcheck
	$(call step,PDF,book.pdf and programs.pdf (pdflatex until the references settle; a few minutes))
	$(Q)mkdir -p $(@D)
	$(Q)tools/numcheck $(NW) $(APPENDIX) $(SOLUTIONS)
	$(Q)printf '\\input{book-master}\n' > build/tex/book.tex
	$(Q)printf '\\input{programs-master}\n' > build/tex/programs.tex
	$(Q)cd build/tex && $(TEXENV) ../../tools/texpair $(TEXPDF_FMT) book programs book-body.tex $(addprefix ../../,$(BOOK_TEX)) \
	  > book.texpdf.log 2>&1 || { tail -n 40 book.log; tail -n 40 programs.log; tail -n 3 book.texpdf.log; exit 1; }
	$(Q)tools/bookcheck build/tex/book.pdf build/tex/book.log $(NW) $(APPENDIX) $(SOLUTIONS)
	$(Q)tools/bookcheck build/tex/programs.pdf build/tex/programs.log $(NW) $(APPENDIX) $(SOLUTIONS)
	$(Q)cp build/tex/book.pdf build/pdf/book.pdf
	$(Q)cp build/tex/programs.pdf build/pdf/programs.pdf

$(filter build/pdf/stage-%,$(PDFS)): build/pdf/stage-%.pdf: build/tex/stage-%-body.tex $(DOCS) build/results/stage-%.txt \
                       build/results/stage-%-tests.tex build/results/stage-%-adds.tex \
                       $$(filter build/fig/stage_$$*/.done,$(FIGSTAMPS)) \
                       $$(call bench_quoted,$$(wildcard stages/stage_$$*_*.nw)) $(PREAMBLE_FMT) \
                       build/results/stage-%-values.tex tools/bookcheck tools/texpdf tools/numcheck
	$(call step,PDF,stage-$*.pdf $(call of_stages,$*))
	$(Q)mkdir -p $(@D)
	$(Q)tools/numcheck $(wildcard stages/stage_$*_*.nw)
	$(Q)printf '\\def\\lgstage{%s}\\input{stage-master}\n' $* > build/tex/stage-$*.tex
	$(Q)cd build/tex && $(TEXENV) ../../tools/texpdf $(TEXPDF_FMT) stage-$* stage-$*-body.tex $(addprefix ../../,$(STAGE_TEX)) \
	  > stage-$*.texpdf.log 2>&1 || { tail -n 40 stage-$*.log; tail -n 3 stage-$*.texpdf.log; exit 1; }
	$(Q)BOOKCHECK_LAYOUT=0 tools/bookcheck build/tex/stage-$*.pdf build/tex/stage-$*.log $(wildcard stages/stage_$*_*.nw)
	$(Q)cp build/tex/stage-$*.pdf $@

# ---- the solutions ----------------------------------------------------------------------
# The appendix "Solutions": solutions/solutions_00.nw opens it, solutions_NN.nw hold the
# worked solutions of chapter NN (solutions_A.nw of Appendix A), woven after Appendix A.
# A solution that changes code prints its patch and what make check-solutions saw; a
# solution that runs a program declares the run ("% litgrad-solution-run: NAME stage-NN
# ARGS", run from the repository's root by tools/solution-runs' rules) and quotes its
# captured output. See solutions/README.md.
# A patch is printed for a reader (tools/solution-patch-show): each hunk headed by its file
# and line, short context, noweb's markup set as the book sets it; plain text for the web edition, the
# body of a Verbatim for the PDF (-patch.tex). The patch file itself is what git applies.
# A solution whose point is a few hunks of a long patch names them
# ("% litgrad-solution-hunks: NN-K REGEX" in its solutions_NN.nw): the book and the web
# edition print only the hunks with a line that matches. The book also collapses a long
# run of removed lines into one line that counts them (the web edition prints them). Where
# the book's listing is not the whole patch, the companion prints the whole patch
# (-whole.tex, beside the outcome).
sol_hunks = $(shell sed -n 's/^% litgrad-solution-hunks: $(1) //p' $(SOLUTIONS))
build/results/solution-%.patch: solutions/%.patch tools/solution-patch-show $(SOLUTIONS)
	$(Q)mkdir -p $(@D)
	$(Q)tools/solution-patch-show --whole $(if $(call sol_hunks,$*),--hunks '$(call sol_hunks,$*)') $< > $@
build/results/solution-%-patch.tex: solutions/%.patch tools/solution-patch-show $(SOLUTIONS)
	$(Q)mkdir -p $(@D)
	$(Q)tools/solution-patch-show --tex $(if $(call sol_hunks,$*),--hunks '$(call sol_hunks,$*)') $< > $@
	$(Q)tools/solution-patch-show --tex --whole $< > $(@:-patch.tex=-whole.tex)
	$(Q)if cmp -s $@ $(@:-patch.tex=-whole.tex); then rm -f $(@:-patch.tex=-whole.tex); fi
build/results/solution-%-result.txt: solutions/%.patch $$(wildcard solutions/results/%.txt) tools/solution-outcome
	@test -f solutions/results/$*.txt || { echo "solutions/$*.patch has no checked result:" \
	  "run make check-solutions UPDATE=1 SOLUTION=$*" >&2; exit 1; }
	$(Q)mkdir -p $(@D)
	$(Q)tools/solution-outcome solutions/results/$*.txt > $@
# Under a solution in the book, the verdict: what make check-solutions saw without the
# failing tests' messages (lines indented by six spaces, and the teardown notes of a
# test that had already failed) and without the runs of the patched program, apart from
# the lines a solution's text names (% litgrad-solution-show: NN-K REGEX, in its
# solutions_NN.nw); the companion prints the whole outcome.
build/results/solution-%-verdict.txt: solutions/%.patch $$(wildcard solutions/results/%.txt) tools/solution-outcome $(SOLUTIONS)
	$(Q)tools/solution-outcome --verdict solutions/results/$*.txt $(SOLUTIONS) > $@
build/results/solution-outcomes.tex: $(SOL_PATCHES) $(SOLUTIONS)
	$(Q)mkdir -p $(@D)
	$(Q)for p in $(basename $(notdir $(SOL_PATCHES))); do \
	  n=$${p%%-*}; k=$${p#*-}; case $$n in [0-9]*) n=$$((10#$$n));; esac; \
	  printf '\\lgsoloutcome{%s}{%s.%s}\n' "$$p" "$$n" "$$k"; done > $@
	$(Q)sed -n 's/^% litgrad-solution-run: *\([^ ]*\) *\(.*\)$$/\\lgsolrunout{\1}{\2}/p' $(SOLUTIONS) >> $@

# The program runs the solutions quote: one rule each, generated from their declarations.
build/solutions.mk: $(SOLUTIONS) tools/solution-runs
	$(Q)mkdir -p $(@D)
	$(Q)tools/solution-runs $(SOLUTIONS) > $@.tmp && mv $@.tmp $@
# A solution may quote a stage's captured output too (bench-NN.txt, crosscheck.txt...).
build/results/solutions-values.tex: $(SOLUTIONS) $(SOL_ALL) tools/lgvalues \
                                    $$(filter build/results/%,$$(call value_deps,S,$(SOLUTIONS)))
	$(Q)mkdir -p $(@D)
	$(Q)$(if $(SOLUTIONS),tools/lgvalues S $(SOLUTIONS),:) > $@.tmp && mv $@.tmp $@

# make solutions: the appendix alone, as the book prints it.
build/tex/solutions-body.tex: $(SOLUTIONS) $(WEAVE_TOOLS)
	$(call step,WEAVE,solutions)
	$(Q)mkdir -p $(@D)
	$(Q)$(WEAVE) $(SOLUTIONS) > $@
build/pdf/solutions.pdf: build/tex/solutions-body.tex $(SOL_ALL) $(SOL_VERDICTS) build/results/solutions-values.tex \
                         docs/solutions-master.tex docs/preamble.tex $(PREAMBLE_FMT) tools/texpdf tools/bookcheck
	$(call step,PDF,solutions.pdf)
	$(Q)mkdir -p $(@D)
	$(Q)tools/numcheck $(SOLUTIONS)
	$(Q)printf '\\input{solutions-master}\n' > build/tex/solutions.tex
	$(Q)cd build/tex && $(TEXENV) ../../tools/texpdf $(TEXPDF_FMT) solutions solutions-body.tex ../../docs/preamble.tex \
	  ../../docs/solutions-master.tex > solutions.texpdf.log 2>&1 || { tail -n 40 solutions.log; exit 1; }
	$(Q)BOOKCHECK_LAYOUT=0 tools/bookcheck build/tex/solutions.pdf build/tex/solutions.log $(SOLUTIONS)
	$(Q)cp build/tex/solutions.pdf $@
solutions: build/pdf/solutions.pdf

# make check-solutions: every code-changing solution proved on a scratch tree
# (tools/check-solutions; its outcome compared with solutions/results/, UPDATE=1 writes it).
check-solutions: | deps
	$(Q)tools/check-solutions $(if $(filter-out 0 no,$(UPDATE)),--update) $(SOLUTION)

# ---- the web edition ----------------------------------------------------------------
# The same pipeline as the PDF's ($(WEAVE): finduses, tools/nwrefs, noidx, tools/nwprogram)
# with noweb's stream itself as the output (-backend cat), read by tools/nwhtml instead of
# totex: one page per chapter and appendix, the chunk and identifier indexes, the
# captured outputs and values the PDF prints, figures as SVG (dot -Tsvg, and each chart's
# gnuplot script with the svg terminal), formulas as MathML made by pandoc. Nothing is
# fetched when a page is read.
HTML := build/html/index.html
$(HTML): $(NW) $(APPENDIX) $(WEAVE_TOOLS) tools/nwhtml docs/html/litgrad.css $(DOCS) $(RESULTS) \
         $(FIGSTAMPS) $(BOOK_FIGS) $(call bench_quoted,$(NW)) build/results/crosscheck.txt \
         build/results/all-values.tex $(SOLUTIONS) $(SOL_ALL)
	$(call step,HTML,$(HTML))
	$(Q)$(WEAVE) -backend cat $(NW) $(APPENDIX) $(SOLUTIONS) | tools/nwhtml build/html
# Downloads, linked from the index page: the two volumes as PDF and each stage's tangled
# sources (build/tangle/stage_NN: the library so far and this stage's main, stage-NN.c, not
# the earlier stages' mains) as a tar.gz made reproducibly (names sorted, no dates or
# owners), so a reader gets a stage's code without cloning. Made after
# the pages (tools/nwhtml writes build/html/ afresh), hence index.html as a prerequisite.
HTML_DL := build/html/download
HTML_DOWNLOADS := $(foreach n,$(STAGES),$(HTML_DL)/stage-$(n).tar.gz) $(HTML_DL)/book.pdf $(HTML_DL)/programs.pdf
# The archive also holds the data sets (data/ of the repository, as stage_NN/data/) that the
# programs read by default, and not the figure scripts (*.gp), which are the book's.
HTML_DATA := $(sort $(wildcard data/*.csv data/*.csv.gz))
$(HTML_DL)/stage-%.tar.gz: $(T)/stage_%/.tangled $(HTML) $(HTML_DATA)
	@mkdir -p $(@D)
	$(Q){ find $(T)/stage_$* -type f ! -name '.*' ! -name '*.gp' ! \( -name 'stage-*.c' ! -name 'stage-$*.c' \); \
	      printf '%s\n' $(HTML_DATA); } | sed 's,^data/,$(T)/stage_$*/data/,' | LC_ALL=C sort | sed 's,^$(T)/stage_$*/data/,data/,' | \
	    tar --no-recursion --mtime=@0 --owner=0 --group=0 --numeric-owner \
	        --transform='s,^$(T)/,,;s,^data/,stage_$*/data/,' -T - -cf - | gzip -9n > $@.tmp
	$(Q)mv $@.tmp $@
$(HTML_DL)/%.pdf: build/pdf/%.pdf $(HTML)
	@mkdir -p $(@D)
	$(Q)cp $< $@
html: $(HTML) $(HTML_DOWNLOADS)

# The browser test: Debian's Chromium driven by playwright-core (pinned by
# tests/html/package-lock.json, installed with npm ci; it downloads no browser).
CHROMIUM := /usr/bin/chromium
tests/html/node_modules/.package-lock.json: tests/html/package.json tests/html/package-lock.json
	$(Q)cd tests/html && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
html-check: $(HTML) $(HTML_DOWNLOADS) tests/html/node_modules/.package-lock.json
	$(call step,CHECK,the web edition in Chromium)
	$(Q)CHROMIUM=$(CHROMIUM) node tests/html/check.mjs build/html build/html-shots

# A stage with benchmarks declares "% litgrad-bench:" in its .nw file; its program then
# answers --bench by printing its figures (built without sanitizers, -O2).
BENCH_STAGES := $(foreach n,$(STAGES),$(if $(shell grep -l '^% litgrad-bench:' stages/stage_$(n)_*.nw),$(n)))
# The book quotes the figures: build/results/bench-NN.txt is the whole output and
# bench-NN-summary.txt its per-shape lines, each headed by the machine and the compiler
# that measured them. make measures once, when the program changed; make bench measures
# again and replaces the file, so the next make weaves the new figures.
BENCH_RESULTS := $(foreach n,$(BENCH_STAGES),build/results/bench-$(n).txt)
# The machine and the compiler, as the header prints them: two labelled lines, the
# processor's and the compiler's names each cut to BENCH_WIDTH characters (an ellipsis
# marks a cut), so that the header fits the page whatever the names. LG_MACHINE is the
# one place the processor's name comes from: make LG_MACHINE='...' overrides it (make
# machine-check does).
LG_MACHINE ?= $(shell { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1 | grep . || \
  uname -m; } 2>/dev/null)
LG_COMPILER ?= $(shell $(CC) --version 2>/dev/null | head -n 1)
BENCH_WIDTH := 64
bench_cut = "$$(v=$(call c_shell_word,$(1)); [ $${\#v} -le $(BENCH_WIDTH) ] && echo "$$v" || \
  echo "$${v:0:$$(($(BENCH_WIDTH) - 3))}...")"
bench_header = printf 'machine:  %s, %s cores\ncompiler: %s, %s\n' $(call bench_cut,$(LG_MACHINE)) \
  "$$(nproc)" $(call bench_cut,$(LG_COMPILER)) '-O2 -g'
# The benchmark build: each program as make builds it, except that model.c is compiled
# with -DLG_NO_EXECUTOR_CHECKS: the checks of litgrad's own executor are assertions,
# off in the benchmark as assertions would be (Stage 07, "The executor's checks are
# assertions"); the program says so. Every other object, and every assert, is make's.
BENCH_BINS := $(foreach n,$(BENCH_STAGES),build/bench/bin/stage-$(n))
BENCH_MODELS := $(foreach n,$(BENCH_STAGES),build/bench/obj/stage_$(n)/model.o)
$(BENCH_MODELS): build/bench/obj/stage_%/model.o: $(T)/stage_%/model.c tools/cc-once
	$(Q)$(call CC_ONCE,$(<D)) $(DATA_DIR_DEFINE) -DLG_NO_EXECUTOR_CHECKS $<
BENCH_LIBS := $(foreach n,$(BENCH_STAGES),build/bench/obj/stage_$(n)/lib.a)
$(BENCH_LIBS): build/bench/obj/stage_%/lib.a: build/obj/stage_%/lib.a build/bench/obj/stage_%/model.o
	$(Q)cp $< $@.tmp && ar rs $@.tmp $(@D)/model.o && mv $@.tmp $@
$(BENCH_BINS): build/bench/bin/stage-%: build/obj/stage_$$*/stage-$$*.o build/bench/obj/stage_%/lib.a
	$(call step,LD,bench/bin/stage-$*)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(PROGRAM_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BENCH_RESULTS): build/results/bench-%.txt: build/bench/bin/stage-%
	$(call step,BENCH,stage $* > results/bench-$*.txt)
	$(Q)mkdir -p $(@D)
	$(Q){ $(bench_header); $< --bench; } > $@.tmp && mv $@.tmp $@
build/results/bench-%-summary.txt: build/results/bench-%.txt
	$(Q)grep -E '^(machine|compiler|Stage|MLP)|  forward|times the previous' $< > $@

bench: $(BENCH_BINS)
	@if [ -z '$(BENCH_STAGES)' ]; then echo "bench: no stage declares benchmarks"; fi
	@mkdir -p build/results
	@for n in $(BENCH_STAGES); do echo "== stage $$n benchmarks"; \
	  { $(bench_header); build/bench/bin/stage-$$n --bench; } | tee build/results/bench-$$n.txt.tmp; \
	  mv build/results/bench-$$n.txt.tmp build/results/bench-$$n.txt; done

# make readme-check: every command of the README's ```sh blocks that .ci/run does not run
# itself, run in order from here (tools/readme-commands; CI runs it last: it applies an
# exercise's patch and takes it back). make lint checks the README's length and links.
readme-check:
	+@tools/readme-commands run README.md .ci/run

# make machine-check: the chapters that quote the benchmarks, built in a copy of the clone
# whose path is 150 characters long, with a processor's name of 150 (tools/machine-check).
machine-check: | deps
	$(Q)tools/machine-check

# The programs' share of the last stage's tangled lines (issue #11: at most 15 %), and
# each program's and main's length.
program-share: $(T)/stage_$(lastword $(STAGES))/.tangled
	@tools/program-share $(T)/stage_$(lastword $(STAGES))

# ---- Appendix A: litgrad against PyTorch ------------------------------------------------
# The appendix is tangled together with every stage, so its exporter links against the
# last stage's library; its checker is run by Debian's python3 (the one its python3-torch
# is built for, whatever python3 comes first on the PATH). It is woven after the last
# chapter (the .nw file begins with \appendix) and has its own short template in lint.
LAST := $(lastword $(STAGES))
XC := $(T)/appendix_a
PYTHON := /usr/bin/python3
TORCH := /usr/lib/python3/dist-packages/torch/__init__.py
XC_RUN := $(PYTHON) $(XC)/crosscheck.py $(B)/bin/crosscheck-export docs/examples data
EXAMPLES := $(sort $(shell find docs/examples \( -name '*.lgir' -o -name '*.lgv' \) -not -path '*/malformed/*'))

$(XC)/.tangled: $(NW) $(APPENDIX) tools/nwtangle tools/nwcheck | deps
	$(call step,TANGLE,appendix A)
	$(Q)tools/nwtangle $(@D) $(NW) $(APPENDIX)
	$(Q)touch $@
$(XC)/crosscheck.py: $(XC)/.tangled ;

# The exporter is compiled like a stage's file (its tree holds every stage's headers): an
# edit that leaves its text and headers as they were compiles nothing.
$(B)/xcobj/crosscheck-export.o: $(XC)/crosscheck-export.c tools/cc-once
	$(Q)$(call CC_ONCE,$(XC)) $<

$(B)/bin/crosscheck-export: $(B)/xcobj/crosscheck-export.o $(B)/obj/stage_$(LAST)/lib.a
	$(call step,LD,bin/crosscheck-export)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(PROGRAM_LDFLAGS) -o $@ $^ $(LDLIBS)

# Stage 12's tests also run the exporter, for its command line (PyTorch not needed): every
# test binary that holds them needs it, so that make test-stage 12 alone runs them too.
XC_TEST_STAGES := $(shell for n in $(STAGES); do [ $$n -ge 12 ] && echo $$n; done)
$(foreach n,$(XC_TEST_STAGES),$(B)/test/stage-$(n)): $(B)/bin/crosscheck-export

# The table in the book: the checker's output when PyTorch is installed (a failed case
# shows as FAIL in it; make crosscheck is what fails), otherwise a plain statement that
# the cross-check did not run. Installing or removing PyTorch changes $(TORCH_STATE): the
# table follows.
# Whether PyTorch was installed when the table was made is remembered in a file of its own
# ($(TORCH_STATE)): the package keeps its files' dates, so installing it would not make
# $(TORCH) newer than the table. When the state differs, the table is made again.
TORCH_STATE := build/results/.torch-$(if $(wildcard $(TORCH)),present,absent)
.PHONY: torch-state-changed
torch-state-changed: ;
build/results/crosscheck.txt: $(B)/bin/crosscheck-export $(XC)/crosscheck.py $(EXAMPLES) $(wildcard data/iris.csv data/digits.csv.gz) \
                              $(if $(wildcard $(TORCH_STATE)),,torch-state-changed)
	$(call step,RUN,crosscheck > results/crosscheck.txt)
	$(Q)mkdir -p $(@D)
	$(Q)if [ -f $(TORCH) ]; then status=0; $(XC_RUN) > $@.tmp || status=$$?; \
	  [ $$status -eq 0 ] || echo "crosscheck.py exited with status $$status" >> $@.tmp; else \
	  echo "litgrad: PyTorch is not installed: Appendix A of this build says that the cross-check did not run" >&2; \
	  printf '%s\n' "This build of the book did not run the cross-check: PyTorch (Debian's" \
	    "python3-torch) is not installed on the machine that built it. 'make crosscheck'" \
	    "installs it and prints the table; 'make' then puts the table here." > $@.tmp; fi
	$(Q)if [ -f $(TORCH) ]; then echo '\lgcrosschecktrue'; else echo '\lgcrosscheckfalse'; fi \
	  > build/results/crosscheck-ran.tex
	$(Q)rm -f build/results/.torch-* && touch $(TORCH_STATE)
	$(Q)mv $@.tmp $@

crosscheck: $(B)/bin/crosscheck-export $(XC)/.tangled
	$(Q)tools/install-deps crosscheck
	$(Q)mkdir -p build/results
	$(Q)status=0; $(XC_RUN) > build/results/crosscheck.txt.tmp || status=$$?; \
	mv build/results/crosscheck.txt.tmp build/results/crosscheck.txt; \
	echo '\lgcrosschecktrue' > build/results/crosscheck-ran.tex; \
	cat build/results/crosscheck.txt; exit $$status

# ---- fuzzing ------------------------------------------------------------------------------
# A fuzz target is a file tests/fuzz/fuzz_NAME.c that defines LLVMFuzzerTestOneInput and
# has a seed corpus, the directory tests/fuzz/corpus/NAME/ (and, if it likes, a libFuzzer
# dictionary tests/fuzz/NAME.dict). Every such file is picked up by itself and linked
# against the last stage's library; nothing here names a target.
#   make fuzz [FUZZ_SECONDS=60]  builds each target with clang -fsanitize=fuzzer,address,
#       undefined (build/fuzz/) and runs it FUZZ_SECONDS on a working copy of its corpus
#       (build/fuzz/corpus/NAME/, seeded from tests/fuzz/corpus/NAME/ and the target's
#       regressions), one target after the other. A finding (crash, leak, sanitizer
#       report, timeout) is written to build/fuzz/findings/NAME/ and fails make.
#   A finding, once fixed, is kept as a file in tests/fuzz/regressions/NAME/: make test
#   (fuzz-regressions) runs every such file through the target linked without libFuzzer,
#   with $(CC) and $(CFLAGS) (the sanitizers under SAN=1) and tests/fuzz/regress_main.c,
#   each file in a process of its own.
FUZZ_SECONDS := 60
FUZZ_TIMEOUT := 20
FUZZ_CC := clang
FUZZ_CFLAGS := $(WARNINGS) -ffp-contract=off -O1 -g -fno-omit-frame-pointer \
  -fsanitize=address,undefined -fno-sanitize-recover=all
fuzz_name = $(patsubst fuzz_%.c,%,$(notdir $(1)))
FUZZ_NAMES := $(foreach f,$(sort $(wildcard tests/fuzz/fuzz_*.c)),\
  $(if $(wildcard tests/fuzz/corpus/$(call fuzz_name,$f)/.),$(call fuzz_name,$f)))
FUZZ_TREE := $(T)/stage_$(LAST)
FUZZ_LIB_OBJS := $(patsubst $(B)/obj/stage_$(LAST)/%,build/fuzz/obj/%,$(call lib_objs,$(LAST)))

build/fuzz/obj/%.o: $(FUZZ_TREE)/%.c tools/cc-once
	$(Q)tools/cc-once build/fuzz/objcache $@ $(FUZZ_TREE) $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  -fsanitize=fuzzer-no-link -fmacro-prefix-map=$(FUZZ_TREE)/= -I$(FUZZ_TREE) \
	  $(DATA_DIR_DEFINE) $<
build/fuzz/obj/fuzz_%.o: tests/fuzz/fuzz_%.c tools/cc-once | $(FUZZ_TREE)/.tangled
	$(Q)tools/cc-once build/fuzz/objcache $@ $(FUZZ_TREE) $(FUZZ_CC) $(FUZZ_CFLAGS) \
	  -fsanitize=fuzzer-no-link -I$(FUZZ_TREE) $(DATA_DIR_DEFINE) $<
build/fuzz/fuzz_%: build/fuzz/obj/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(call step,LD,fuzz/fuzz_$*)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
-include $(wildcard build/fuzz/obj/*.d)

fuzz: $(foreach n,$(FUZZ_NAMES),build/fuzz/fuzz_$(n))
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p build/fuzz/corpus/$$n build/fuzz/findings/$$n; \
	  dict=; [ ! -f tests/fuzz/$$n.dict ] || dict=-dict=tests/fuzz/$$n.dict; \
	  seeds=tests/fuzz/corpus/$$n; [ ! -d tests/fuzz/regressions/$$n ] || \
	    seeds="$$seeds tests/fuzz/regressions/$$n"; \
	  echo "fuzz $$n: $(FUZZ_SECONDS) s, log in build/fuzz/fuzz_$$n.log"; \
	  if build/fuzz/fuzz_$$n $$dict -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
	       -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix=build/fuzz/findings/$$n/ \
	       build/fuzz/corpus/$$n $$seeds > build/fuzz/fuzz_$$n.log 2>&1; then \
	    grep -E '^#[0-9]+[[:space:]]+DONE' build/fuzz/fuzz_$$n.log | tail -n 1; \
	    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' \
	      build/fuzz/fuzz_$$n.log; \
	  else tail -n 60 build/fuzz/fuzz_$$n.log; \
	    echo "fuzz $$n: a finding in build/fuzz/findings/$$n/; once fixed, keep it in" \
	         "tests/fuzz/regressions/$$n/" >&2; exit 1; fi; \
	done

# The regression driver of each target: the target without libFuzzer, for make test.
FUZZ_REGRESS := $(foreach n,$(FUZZ_NAMES),$(B)/fuzz/regress_$(n))
$(FUZZ_REGRESS): $(B)/fuzz/regress_%: tests/fuzz/fuzz_%.c tests/fuzz/regress_main.c \
                                       $(B)/obj/stage_$(LAST)/lib.a
	$(call step,LD,$(@:$(B)/%=%))
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -I$(FUZZ_TREE) -o $@ $(filter %.c,$^) $(B)/obj/stage_$(LAST)/lib.a $(LDLIBS)

fuzz-regressions: $(FUZZ_REGRESS)
	@passed=0; failed=0; for n in $(FUZZ_NAMES); do \
	  [ -d tests/fuzz/regressions/$$n ] || continue; \
	  files=$$(find tests/fuzz/regressions/$$n -type f | sort); [ -n "$$files" ] || continue; \
	  line=$$($(B)/fuzz/regress_$$n $$n $$files | tail -n 1) || :; \
	  read -r p f < <(echo "$$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/'); \
	  [ -n "$$p" ] || { p=0; f=1; }; \
	  echo "  $$line"; passed=$$((passed + p)); failed=$$((failed + f)); \
	done; \
	echo "fuzz regressions: $$passed passed, $$failed failed"; [ $$failed -eq 0 ]

clean:
	$(Q)rm -rf build

.SECONDARY:
