TOOLS += gice-bench
TOOLS += gice-info
TOOLS += gice-demo
TOOLS += gicerun
TOOLS += gice-watchdog-demo

# gice-bench is several files (tools/bench/): this rule wins over the one-object pattern rule.
# Prerequisites expand as this file is read, before the Makefile sets LIBA: name the archive.
GICE_BENCH_SRCS := $(wildcard tools/bench/*.c)
GICE_BENCH_OBJS := $(GICE_BENCH_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/bin/gice-bench: $(GICE_BENCH_OBJS) $(BUILD)/lib/libgice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(GICE_BENCH_OBJS) $(BUILD)/lib/libgice.a $(LDLIBS)
-include $(GICE_BENCH_OBJS:.o=.d)

# gicerun is several files too (tools/gicerun/, one concern each)
GICERUN_SRCS := $(wildcard tools/gicerun/*.c)
GICERUN_OBJS := $(GICERUN_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/bin/gicerun: $(GICERUN_OBJS) $(BUILD)/lib/libgice.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(GICERUN_OBJS) $(BUILD)/lib/libgice.a $(LDLIBS)
-include $(GICERUN_OBJS:.o=.d)
