LIB_SRCS += fabric/fabric.c fabric/fab_ofi.c
TESTS += test_fabric
