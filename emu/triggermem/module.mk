LIB_SRCS += emu/triggermem/triggermem.c emu/triggermem/tm_counter.c emu/triggermem/tm_queue.c
TESTS += test_triggermem
