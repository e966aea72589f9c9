LIB_SRCS += emu/sm_threads/sm_threads.c
TESTS += test_sm_threads
