LIB_SRCS += api/gice.c api/api_device.c api/api_ops.c api/api_stream.c api/api_watchdog.c api/api_sym.c api/api_team.c api/api_wait.c
