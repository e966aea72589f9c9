LIB_SRCS += emu/common/common.c emu/common/config.c
