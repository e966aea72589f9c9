LIB_SRCS += api/gice.c api/api_device.c api/api_device_close.c api/api_ops.c api/api_stream.c api/api_watchdog.c api/api_faults.c
LIB_SRCS += api/api_storage.c api/api_pool.c
LIB_SRCS += api/api_sym.c api/api_team.c api/api_wait.c
LIB_SRCS += api/coll_api.c api/coll_init.c api/coll_types.c api/coll_small.c api/coll_ring.c api/coll_direct.c
LIB_SRCS += api/api_obs.c api/api_left.c
LIB_SRCS += api/api_trace.c
