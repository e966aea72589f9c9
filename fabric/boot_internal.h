/* boot_internal.h: the bootstrap's state and socket helpers, shared by its files
 * (bootstrap.c: rendezvous and exchanges; boot_pmix.c: the same under PMIx; boot_clock.c: clock
 * alignment). Not an API. */
#ifndef GICE_BOOT_INTERNAL_H
#define GICE_BOOT_INTERNAL_H

#include "fabric/bootstrap.h"

#ifdef GICE_HAVE_PMIX
#include <pmix.h>
#endif

#ifdef GICE_HAVE_PMIX
typedef struct pmix_call pmix_call_t;
#define PMIX_ABANDONED_MAX 64
#endif

struct boot {
	uint32_t rank, size;
	uint64_t secret, timeout_ns;
	int64_t clock_offset_ns; /* rank 0's CLOCK_MONOTONIC minus ours (boot_clock.c) */
	uint64_t clock_rtt_ns;   /* the round trip of that estimate; 1: exact; 0: not measured */
	int *fds; /* rank 0: fd of each rank (fds[0] unused); others: fds[0] to rank 0 */
#ifdef GICE_HAVE_PMIX
	int pmix;        /* rank, size and exchanges come from the launcher's PMIx server */
	pmix_proc_t me;
	uint32_t round;  /* allgathers so far: each uses its own key */
	/* calls we stopped waiting for, their callback still due: freed after PMIx_Finalize */
	pmix_call_t *abandoned[PMIX_ABANDONED_MAX];
	uint32_t n_abandoned;
#endif
};

#define BOOT_HOW_TO_LAUNCH                                                                             \
	"start a job of several ranks with srun --mpi=pmix, with Open MPI's mpirun, or with gicerun -n N"

/* now + the bootstrap timeout */
uint64_t boot_deadline(const boot_t *b);
/* poll one fd for ev until deadline: GICE_OK, GICE_ERR_TIMED_OUT, GICE_ERR_IO */
int boot_wait_fd(int fd, short ev, uint64_t deadline);
/* Move exactly len bytes, or fail: GICE_ERR_PEER_DEAD when the other side closed. */
int boot_xfer(int fd, void *buf, size_t len, int sending, uint64_t deadline);
void boot_nodelay(int fd);

/* Clock alignment (boot_clock.c), collective. Over the rendezvous sockets (b->fds): */
int boot_clock_sync(boot_t *b);
/* Under PMIx (no sockets): exact for the ranks on rank 0's machine, pinged over a socket rank
 * 0 opens for it for the others (GICE_CLOCK_SYNC). A failure leaves the clocks unaligned and is
 * not the job's: the trace says so. */
void boot_clock_pmix(boot_t *b);

#ifdef GICE_HAVE_PMIX
/* boot_pmix.c: the job from the launcher's PMIx server (PMIX_RANK set): *out, or an error said. */
int boot_pmix_open(uint64_t timeout_ns, boot_t **out);
/* boot_allgather under PMIx */
int boot_pmix_allgather(boot_t *b, const void *mine, size_t len, void *all);
/* boot_fini's part: PMIx_Finalize, then the calls we stopped waiting for */
void boot_pmix_fini(boot_t *b);
#endif

#endif
