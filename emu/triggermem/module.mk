LIB_SRCS += emu/triggermem/triggermem.c
TESTS += test_triggermem
