# ravel — plain GNU Make. `make` builds build/libravel.a, build/libravel.so
# and build/ravel; `make test` builds and runs every test; `make demo` runs
# the main demo. `make SAN=1 test` (or `make asan-test`) builds everything in
# build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer.
# `make tsan-test` runs the tests of concurrent use (one program from many
# threads, the thread pool) built in build-tsan/ with ThreadSanitizer.
# `make install PREFIX=...` and `make uninstall`: see "install" below.

CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT     ?= -O1
else ifeq ($(SAN),thread)
BUILD   ?= build-tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
OPT     ?= -O1
else
BUILD   ?= build
SANFLAGS =
OPT     ?= -O2
endif

WARN    = -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wundef
# -ffile-prefix-map: objects (debug info, __FILE__) name sources relative to
# the repository, so no build path is baked into what `make install` copies.
CFLAGS  += -std=c11 $(OPT) -g $(WARN) -fPIC -D_GNU_SOURCE -Iinclude -Isrc -I$(BUILD)/gen $(SANFLAGS) \
           -ffile-prefix-map=$(CURDIR)=.
LDLIBS  = -lm -ldl -lpthread
LDFLAGS += $(SANFLAGS)

# The version, read from include/ravel.h's RV_VERSION_* lines (the one place
# it is written). The shared library is libravel.so.MAJOR.MINOR.PATCH with
# SONAME libravel.so.MAJOR; libravel.so links to it.
rv_version_part = $(shell sed -n 's/^[#]define RV_VERSION_$(1) *\([0-9][0-9]*\).*/\1/p' include/ravel.h)
VERSION_MAJOR  := $(call rv_version_part,MAJOR)
VERSION        := $(VERSION_MAJOR).$(call rv_version_part,MINOR).$(call rv_version_part,PATCH)
SO_NAME        := libravel.so.$(VERSION_MAJOR)
SO_FILE        := libravel.so.$(VERSION)

LIB_SRC   := $(sort $(wildcard src/*/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HDRS      := $(wildcard include/*.h src/*/*.h src/*/*.def tools/*.h)
# ravel._fast for the Python package (below, "The Python package's compiled
# hot path"): empty when $(PYTHON) has no headers
PYTHON   ?= python3
PY_VARS  := $(shell $(PYTHON) -c 'import sysconfig as s; print(s.get_paths()["include"], s.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_INC   := $(word 1,$(PY_VARS))
PYEXT    := $(if $(and $(word 2,$(PY_VARS)),$(wildcard $(PY_INC)/Python.h)),$(BUILD)/pyext/_fast$(word 2,$(PY_VARS)))

.PHONY: all test asan-test tsan-test demo clean format lint fuzz-sched fuzz-programs fuzz-tune fuzz-parse bench deps

all: $(BUILD)/libravel.a $(BUILD)/libravel.so $(BUILD)/ravel $(PYEXT)

# Debian packages the build needs (tools/install-deps.sh says which and why).
deps:
	@sh tools/install-deps.sh

# Without the DLPack header the build would stop at a compiler error deep in
# src/runtime; say what to install instead (checked before any object).
.PHONY: check-dlpack
check-dlpack:
	@printf '#include <dlpack/dlpack.h>\n' | $(CC) $(CFLAGS) -E -x c - -o /dev/null 2>/dev/null || \
	  { echo "ravel: the DLPack header <dlpack/dlpack.h> is missing: run 'make deps'" \
	         "(it installs Debian's libdlpack-dev; tools/install-deps.sh)" >&2; exit 1; }

$(LIB_OBJ) $(TOOL_OBJ): | check-dlpack

$(BUILD)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# ravel_rt.h embedded in the library (src/jit/rt_header.c): its bytes as a C
# initializer list, written with od and sed.
$(BUILD)/gen/ravel_rt_h.inc: include/ravel_rt.h
	@mkdir -p $(dir $@)
	od -An -v -tx1 $< | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' >$@.tmp && mv $@.tmp $@

$(BUILD)/src/jit/rt_header.o: $(BUILD)/gen/ravel_rt_h.inc

# The runtime's thread pool, embedded the same way into the AOT output of
# `ravel build --threads` (src/codegen/c_aot_pool.c).
$(BUILD)/gen/threadpool_c.inc: src/runtime/threadpool.c
	@mkdir -p $(dir $@)
	od -An -v -tx1 $< | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' >$@.tmp && mv $@.tmp $@

$(BUILD)/src/codegen/c_aot_pool.o: $(BUILD)/gen/threadpool_c.inc

$(BUILD)/libravel.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# src/libravel.map exports the public API only (it says which names and why).
$(BUILD)/$(SO_FILE): $(LIB_OBJ) src/libravel.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SO_NAME) -Wl,--version-script,src/libravel.map \
	  -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/libravel.so: $(BUILD)/$(SO_FILE)
	ln -sf $(SO_FILE) $(BUILD)/$(SO_NAME)
	ln -sf $(SO_NAME) $@

# The Python package's compiled hot path (python/ravel/_fast.c, ravel._fast)
# for the source tree's package, in $(BUILD)/pyext/ next to the library,
# where python/ravel looks for it. Built against $(PYTHON)'s headers when it
# has them, else left out (the package then uses ctypes only, silently);
# `pip install ./python` builds its own copy. No link to libravel: the
# package hands it the functions of the library it loaded.
$(BUILD)/pyext/_fast%: python/ravel/_fast.c include/ravel.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(PY_INC) -shared $(LDFLAGS) -o $@ $<

# -rdynamic: JIT-compiled kernels resolve ravel_rt_* runtime symbols from the host.
$(BUILD)/ravel: $(TOOL_OBJ) $(BUILD)/libravel.a
	$(CC) $(LDFLAGS) -rdynamic -o $@ $(TOOL_OBJ) $(BUILD)/libravel.a $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/*.h) $(BUILD)/libravel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -rdynamic -o $@ $< $(BUILD)/libravel.a $(LDFLAGS) $(LDLIBS)

# test_kernels checks the benchmark kernels' programs, so it links their generator.
$(BUILD)/tests/test_kernels: tests/unit/test_kernels.c bench/kernel_sources.c bench/kernel_sources.h \
                             bench/ravel_kernels.h tests/harness.h $(BUILD)/libravel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ibench -rdynamic -o $@ $< bench/kernel_sources.c $(BUILD)/libravel.a \
	  $(LDFLAGS) $(LDLIBS)

# The test runner prints every suite's result and ends with "N passed, N failed".
test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN) $(BUILD)/fuzz_sched $(BUILD)/fuzz_programs $(BUILD)/fuzz_parse
	@BUILD=$(BUILD) SAN=$(SAN) sh tests/run.sh

test-only: all $(TEST_BIN) $(BUILD)/fuzz_sched $(BUILD)/fuzz_programs $(BUILD)/fuzz_parse
	@BUILD=$(BUILD) SAN=$(SAN) sh tests/run.sh

# The schedule fuzzer (tests/fuzz_sched.c): random schedules of every example
# checked against the interpreter. tests/suite_fuzz.sh runs a bounded number;
# `make fuzz-sched` runs FUZZ_COUNT (reproducers of failures go to FUZZ_REPROS).
FUZZ_SEED   ?= 1
FUZZ_COUNT  ?= 10400
FUZZ_JOBS   ?= 2
FUZZ_REPROS ?= $(BUILD)/fuzz_repros

$(BUILD)/fuzz_sched: tests/fuzz_sched.c tests/fuzz_common.c tests/fuzz_common.h $(BUILD)/libravel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -rdynamic -o $@ $< tests/fuzz_common.c $(BUILD)/libravel.a $(LDFLAGS) $(LDLIBS)

# The program fuzzer (tests/fuzz_programs.c): random programs (tests/fuzz_gen.c)
# with random schedules checked against the interpreter. tests/suite_fuzz_programs.sh
# runs a bounded number over the features that pass; `make fuzz-programs` runs
# FUZZ_COUNT programs over FUZZ_FEATURES (reproducers go to FUZZ_PROGRAM_REPROS).
FUZZ_FEATURES       ?= all
FUZZ_PROGRAM_REPROS ?= $(BUILD)/fuzz_program_repros

$(BUILD)/fuzz_programs: tests/fuzz_programs.c tests/fuzz_gen.c tests/fuzz_gen.h tests/fuzz_common.c \
                        tests/fuzz_common.h $(BUILD)/libravel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -rdynamic -o $@ $< tests/fuzz_gen.c tests/fuzz_common.c $(BUILD)/libravel.a \
	  $(LDFLAGS) $(LDLIBS)

fuzz-programs: $(BUILD)/fuzz_programs
	$(BUILD)/fuzz_programs --seed $(FUZZ_SEED) --count $(FUZZ_COUNT) --jobs $(FUZZ_JOBS) \
	  --features $(FUZZ_FEATURES) --repro-dir $(FUZZ_PROGRAM_REPROS)

# The tuner fuzzer (tests/suite_fuzz_tune.sh, docs/tuning.md "Fuzzing the
# tuner"): random programs through `ravel tune` with a tiny budget, every
# variant and the built dispatcher checked against the interpreter across the
# range, a resumed run measuring nothing. `make test` runs a few programs;
# `make fuzz-tune` runs FUZZ_TUNE_COUNT per feature set for each seed of
# FUZZ_TUNE_SEEDS (failures kept in FUZZ_TUNE_REPROS).
FUZZ_TUNE_SEEDS    ?= 1701 1702 1703 1704 1705
FUZZ_TUNE_COUNT    ?= 20
FUZZ_TUNE_FEATURES ?= contract pack pack,zero,ragged recurse,pack,sched all
FUZZ_TUNE_REPROS   ?= $(BUILD)/fuzz_tune_repros

fuzz-tune: all $(BUILD)/fuzz_programs
	@rc=0; for s in $(FUZZ_TUNE_SEEDS); do \
	  BUILD=$(BUILD) FUZZ_TUNE_SEED=$$s FUZZ_TUNE_COUNT=$(FUZZ_TUNE_COUNT) \
	    FUZZ_TUNE_FEATURES="$(FUZZ_TUNE_FEATURES)" FUZZ_TUNE_KEEP=$(FUZZ_TUNE_REPROS) \
	    sh tests/suite_fuzz_tune.sh || rc=1; \
	done; exit $$rc

fuzz-sched: $(BUILD)/fuzz_sched
	$(BUILD)/fuzz_sched --seed $(FUZZ_SEED) --count $(FUZZ_COUNT) --jobs $(FUZZ_JOBS) \
	  --repro-dir $(FUZZ_REPROS)

# The parse/print fuzzer (tests/fuzz_parse.c): arbitrary bytes through the
# front end, the verifier, the schedule checker and a print/parse/print
# round trip. `make test` replays its seed corpus (tests/fuzz_parse/, where
# every input it found a bug with is kept) and the repository's programs
# through a normal build ($(BUILD)/fuzz_parse, tests/suite_fuzz_parse.sh);
# `make fuzz-parse` runs libFuzzer for FUZZ_PARSE_SECONDS (clang, installed
# then by `tools/install-deps.sh clang`): new inputs go to
# $(FUZZ_PARSE_DIR)/corpus, failing ones to $(FUZZ_PARSE_DIR)/crashes.
FUZZ_PARSE_SECONDS ?= 300
FUZZ_PARSE_DIR     ?= build-fuzz

$(BUILD)/fuzz_parse: tests/fuzz_parse.c $(BUILD)/libravel.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libravel.a $(LDFLAGS) $(LDLIBS)

$(FUZZ_PARSE_DIR)/fuzz_parse: tests/fuzz_parse.c $(LIB_SRC) $(HDRS) $(BUILD)/gen/ravel_rt_h.inc \
                               $(BUILD)/gen/threadpool_c.inc
	@mkdir -p $(dir $@)
	clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -I$(BUILD)/gen -DRV_LIBFUZZER \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ tests/fuzz_parse.c $(LIB_SRC) $(LDLIBS)

fuzz-parse:
	@sh tools/install-deps.sh clang
	@$(MAKE) --no-print-directory $(FUZZ_PARSE_DIR)/fuzz_parse
	@mkdir -p $(FUZZ_PARSE_DIR)/corpus $(FUZZ_PARSE_DIR)/crashes
	$(FUZZ_PARSE_DIR)/fuzz_parse -max_total_time=$(FUZZ_PARSE_SECONDS) -max_len=4096 \
	  -timeout=10 -dict=tests/fuzz_parse.dict -artifact_prefix=$(FUZZ_PARSE_DIR)/crashes/ \
	  $(FUZZ_PARSE_DIR)/corpus tests/fuzz_parse examples tests/error tests/regress

asan-test:
	$(MAKE) SAN=1 test

# Not part of `make test`: ThreadSanitizer slows the pool's spinning down a
# lot, so only the suites that exercise concurrency run under it.
TSAN_TESTS = test_thread_safety test_threadpool test_param
tsan-test: deps
	@$(MAKE) --no-print-directory SAN=thread $(TSAN_TESTS:%=build-tsan/tests/%)
	@for t in $(TSAN_TESTS); do TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" build-tsan/tests/$$t || exit 1; done

demo: deps
	@$(MAKE) --no-print-directory all
	@sh tools/demo.sh $(BUILD)

clean:
	rm -rf build build-asan build-tsan build-fuzz

# Regenerates the golden files (tests/golden/NAME.lower.txt and NAME.c, and
# the output sections of the per-pass goldens tests/lower/NAME.txt) after
# an intended change; tests/suite_golden.sh compares them. Review the diff.
.PHONY: golden-update
golden-update: all $(BUILD)/tests/test_lower_passes
	@BUILD=$(BUILD) GOLDEN_UPDATE=1 sh tests/suite_golden.sh
	@GOLDEN_UPDATE=1 $(BUILD)/tests/test_lower_passes

# Rewrites bench/programs/*.rv, the benchmark kernels' programs as files,
# from bench/kernel_sources.c; test_kernels checks they match. Review the diff.
.PHONY: bench-programs
bench-programs: $(BUILD)/tests/test_kernels
	$(BUILD)/tests/test_kernels --write-programs

format:
	clang-format -i $(LIB_SRC) $(TOOL_SRC) $(TEST_SRC) $(wildcard include/*.h src/*/*.h tests/*.h)

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --std=c11 --inline-suppr --suppress=missingIncludeSystem -Iinclude -Isrc src tools

# ---- install ----
# `make install` copies what `make` built (it compiles nothing new): the
# headers, libravel.a, the shared library and its links, the ravel command,
# ravel.pc for pkg-config and the ravel(1) man page. PREFIX (default
# /usr/local) is where they will be used; DESTDIR, when set, stages them
# under another root (packaging). `make uninstall` removes exactly those
# files and leaves the directories.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALLED    := $(BINDIR)/ravel $(INCLUDEDIR)/ravel.h $(INCLUDEDIR)/ravel_rt.h $(LIBDIR)/libravel.a \
                $(LIBDIR)/$(SO_FILE) $(LIBDIR)/$(SO_NAME) $(LIBDIR)/libravel.so \
                $(PKGCONFIGDIR)/ravel.pc $(MANDIR)/man1/ravel.1

# The man page is made from the command's own help (tools/ravel-man.sh).
$(BUILD)/ravel.1: $(BUILD)/ravel tools/ravel-man.sh README.md
	sh tools/ravel-man.sh $(BUILD)/ravel README.md >$@.tmp && mv $@.tmp $@

.PHONY: install uninstall
install: $(BUILD)/libravel.a $(BUILD)/libravel.so $(BUILD)/ravel $(BUILD)/ravel.1
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/ravel $(DESTDIR)$(BINDIR)/ravel
	install -m 644 include/ravel.h include/ravel_rt.h $(DESTDIR)$(INCLUDEDIR)
	install -m 644 $(BUILD)/libravel.a $(DESTDIR)$(LIBDIR)/libravel.a
	install -m 755 $(BUILD)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libravel.so
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' tools/ravel.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/ravel.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/ravel.pc
	install -m 644 $(BUILD)/ravel.1 $(DESTDIR)$(MANDIR)/man1/ravel.1

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

# Benchmarks (never part of make test): bench/README.md
BENCH_BUILD = $(BUILD)/bench
include bench/Makefile.inc

bench: bench-run

# The tuner's records (src/tune/records.c) are JSON lines read and written with cJSON.
LDLIBS += -lcjson
