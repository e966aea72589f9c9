LIB_SRCS += emu/hbm/hbm.c
TESTS += test_hbm
