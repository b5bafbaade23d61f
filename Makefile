# ravel — plain GNU Make. `make` builds build/libravel.a, build/libravel.so
# and build/ravel; `make test` builds and runs every test; `make demo` runs
# the main demo. `make SAN=1 test` (or `make asan-test`) builds everything in
# build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer.

CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT     ?= -O1
else
BUILD   ?= build
SANFLAGS =
OPT     ?= -O2
endif

WARN    = -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wundef
CFLAGS  += -std=c11 $(OPT) -g $(WARN) -fPIC -D_GNU_SOURCE -Iinclude -Isrc $(SANFLAGS) \
           -DRAVEL_INCLUDE_DIR_DEFAULT='"$(CURDIR)/include"'
LDLIBS  = -lm -ldl -lpthread
LDFLAGS += $(SANFLAGS)

LIB_SRC   := $(sort $(wildcard src/*/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HDRS      := $(wildcard include/*.h src/*/*.h src/*/*.def tests/*.h)

.PHONY: all test asan-test demo clean format lint fuzz-sched fuzz-programs fuzz-parse bench deps

all: $(BUILD)/libravel.a $(BUILD)/libravel.so $(BUILD)/ravel

# Debian packages the build needs (tools/install-deps.sh says which and why).
deps:
	@sh tools/install-deps.sh

$(BUILD)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libravel.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libravel.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# -rdynamic: JIT-compiled kernels resolve ravel_rt_* runtime symbols from the host.
$(BUILD)/ravel: $(TOOL_OBJ) $(BUILD)/libravel.a
	$(CC) $(LDFLAGS) -rdynamic -o $@ $(TOOL_OBJ) $(BUILD)/libravel.a $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/harness.h $(BUILD)/libravel.a
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

$(FUZZ_PARSE_DIR)/fuzz_parse: tests/fuzz_parse.c $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -DRV_LIBFUZZER \
	  -DRAVEL_INCLUDE_DIR_DEFAULT='"$(CURDIR)/include"' \
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

demo: deps
	@$(MAKE) --no-print-directory all
	@sh tools/demo.sh $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

# Regenerates the golden files (tests/golden/NAME.lower.txt and NAME.c) after
# an intended change; tests/suite_golden.sh compares them. Review the diff.
.PHONY: golden-update
golden-update: all
	@BUILD=$(BUILD) GOLDEN_UPDATE=1 sh tests/suite_golden.sh

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

# Benchmarks (never part of make test): bench/README.md
BENCH_BUILD = $(BUILD)/bench
include bench/Makefile.inc

bench: bench-run
