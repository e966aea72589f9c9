/* fab_ofi_internal.h: what the ofi backend's files share (not for other modules): fab_ofi.c
 * (endpoints), fab_addr.c (socket interfaces and addresses), fab_shm.c (shm leftovers). */
#ifndef GICE_FAB_OFI_INTERNAL_H
#define GICE_FAB_OFI_INTERNAL_H

#include "fabric/fabric.h"

/* Indexes in fab_params (fabric.c). */
enum { P_PROVIDER, P_IFACE, P_TX_DEPTH, P_RX_DEPTH };

/* fab_addr.c: copy GICE_FAB_IFACE into the socket providers' unset interface variables. */
void fab_ofi_bind_iface(void);

/* fab_shm.c: remove the shm regions a dead process left under our pid. */
void fab_ofi_sweep_stale_shm(void);

#endif
