# gice top-level Makefile. Quiet by default; V=1 shows full commands.
#   make            build libgice.a/.so and the tools
#   make test       install missing Debian packages, build, run every test
#   make run        install, build, run the demo: gicerun -n 4 gice-demo
#   make asan/tsan  the test suite under AddressSanitizer+UBSan / ThreadSanitizer
#   make loop T="test_reliability test_multiproc" N=20 LOAD=1
#                   run each named test N times (default 10), with LOAD busy loops in the
#                   background (default 0), to measure flakes: scripts/loop-tests.sh
#   make fuzz       FUZZ_SECONDS=60: libFuzzer over the packet parser (tests/fuzz)
#   make install    PREFIX=/usr/local

BUILD   ?= build
# one spelling of the build directory: an absolute one inside the tree (tests/test_link.sh's make
# install) would write absolute targets into the .d files, which the relative one never matches,
# and header changes would stop rebuilding those objects
override BUILD := $(patsubst $(CURDIR)/%,%,$(BUILD))
PREFIX  ?= /usr/local
SAN     ?=
WERROR  ?= $(if $(CI),-Werror,)

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC -pthread -Wall -Wextra -Wshadow -Wno-unused-parameter $(WERROR)
CFLAGS  += -I. -MMD -MP
LDLIBS  := $(shell pkg-config --libs libfabric liburing 2>/dev/null || echo -lfabric -luring) -pthread -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)
# PMIx bootstrap (mpirun, srun --mpi=pmix) when libpmix-dev is installed
ifneq ($(shell pkg-config --exists pmix 2>/dev/null && echo yes),)
CFLAGS  += -DGICE_HAVE_PMIX $(shell pkg-config --cflags pmix)
LDLIBS  += $(shell pkg-config --libs pmix)
PC_PMIX := pmix
endif

ifneq ($(SAN),)
CFLAGS  += -fsanitize=$(SAN) -fno-omit-frame-pointer -O1
LDFLAGS += -fsanitize=$(SAN)
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_SRCS :=
TOOLS    :=
TESTS    :=
TEST_SCRIPTS :=

# plain `make` builds everything, whatever rules the module files define first
.DEFAULT_GOAL := all
include emu/common/module.mk
include $(filter-out emu/common/module.mk,$(wildcard emu/*/module.mk))
include $(wildcard fabric/module.mk api/module.mk tools/module.mk tests/module.mk)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIBA     := $(BUILD)/lib/libgice.a
LIBSO    := $(BUILD)/lib/libgice.so
TOOL_BINS := $(TOOLS:%=$(BUILD)/bin/%)
TEST_BINS := $(TESTS:%=$(BUILD)/tests/%)

.PHONY: all deps test run asan tsan fuzz install clean bench loop FORCE
.SECONDARY:
all: $(LIBA) $(LIBSO) $(TOOL_BINS) $(TEST_BINS)

deps:
	$(Q)bash scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

# The library's list of objects, rewritten only when it changes: a file added to or dropped from
# a module.mk relinks the library even when every object in the new list is older than it (an
# object left from an earlier build of another commit).
LIB_LIST := $(BUILD)/lib/objects.list
$(LIB_LIST): FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIB_OBJS)' | cmp -s - $@ || echo '$(LIB_OBJS)' >$@

$(LIBA): $(LIB_OBJS) $(LIB_LIST)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $(LIB_OBJS)

$(LIBSO): $(LIB_OBJS) $(LIB_LIST)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $(LIB_OBJS) $(LDLIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIBA)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(CHECK_LIBS) $(LDLIBS)

# Each test (binary, or tests/NAME.sh script) runs with a timeout; exit 77 means skipped.
test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) bash scripts/run-tests.sh $(TESTS) $(TEST_SCRIPTS:%=%.sh)

# Flake hunting: each test of T, N times, under LOAD busy loops; one line per failure, then
# "loop: N runs, F failed" per test and overall (logs of failed runs in $(BUILD)/logs/loop/).
loop:
	$(Q)$(if $(T),,$(error make loop needs T="test names"))$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) N=$(or $(N),10) LOAD=$(or $(LOAD),0) bash scripts/loop-tests.sh $(T)

# the main demo: 4 ranks on this host, one emulated GPU each, over the embedded default plane
run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bin/gicerun -n 4 --timeout 300 $(BUILD)/bin/gice-demo

# Sanitized code runs several times slower: Check's per-case timeouts and the per-binary limit
# of run-tests.sh are scaled up for these targets.
asan:
	$(Q)LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
		CK_TIMEOUT_MULTIPLIER=3 GICE_TEST_TIMEOUT=900 \
		$(MAKE) --no-print-directory BUILD=build-asan SAN=address,undefined test

tsan:
	$(Q)CK_TIMEOUT_MULTIPLIER=3 GICE_TEST_TIMEOUT=900 \
		$(MAKE) --no-print-directory BUILD=build-tsan SAN=thread test

# libFuzzer over the receive path's pure part (tests/fuzz/fuzz_packet.c) with ASan+UBSan, from
# the seed corpus (copied: what the run finds stays in build-fuzz/corpus). clang and its runtime
# come from Debian (install-deps.sh) when missing.
FUZZ_SECONDS ?= 60
FUZZ_SRCS := tests/fuzz/fuzz_packet.c emu/ct_engine/ct_proto.c emu/common/crc32c.c emu/common/siphash.c
fuzz:
	$(Q)command -v clang >/dev/null && ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
		>/dev/null 2>&1 || bash scripts/install-deps.sh clang libclang-rt-14-dev
	$(Q)mkdir -p build-fuzz/corpus
	$(Q)clang -O1 -g -std=c11 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -o build-fuzz/fuzz_packet $(FUZZ_SRCS)
	$(Q)cp tests/fuzz/corpus/* build-fuzz/corpus/
	$(Q)build-fuzz/fuzz_packet -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 build-fuzz/corpus

install: all
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/gice $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(LIBA) $(LIBSO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 api/*.h $(DESTDIR)$(PREFIX)/include/gice/
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@PMIX@|$(PC_PMIX)|' api/gice.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/gice.pc

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(LIB_OBJS:.o=.d) $(TOOLS:%=$(BUILD)/obj/tools/%.d) $(TESTS:%=$(BUILD)/obj/tests/%.d)
