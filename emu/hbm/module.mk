LIB_SRCS += emu/hbm/hbm.c emu/hbm/hbm_alloc.c emu/hbm/hbm_reg.c
TESTS += test_hbm
