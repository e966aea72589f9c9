LIB_SRCS += emu/storage/sto_engine.c emu/storage/sto_ctl.c emu/storage/sto_file.c emu/storage/sto_uring.c emu/storage/sto_psync.c
