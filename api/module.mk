LIB_SRCS += api/gice.c
