LIB_SRCS += emu/sm_threads/sm_threads.c emu/sm_threads/smt_stream.c emu/sm_threads/smt_enqueue.c
TESTS += test_sm_threads test_stream_order test_stream_waits test_stream_write
