LIB_SRCS += fabric/fabric.c fabric/fab_ofi.c fabric/fab_ofi_open.c fabric/fab_addr.c fabric/fab_shm.c fabric/fab_fault.c fabric/fab_fault_decide.c fabric/fab_fault_pace.c fabric/fab_fault_hold.c fabric/bootstrap.c fabric/boot_pmix.c fabric/boot_clock.c
TESTS += test_fabric
