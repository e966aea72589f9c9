/* bootstrap.h: how the ranks of a job find each other before any fabric exists.
 *
 * Each process learns its rank and the world size from GICE_RANK and GICE_WORLD_SIZE, and the
 * rendezvous from GICE_BOOTSTRAP=host:port (set by gicerun): rank 0 listens there, every other
 * rank connects (retrying while rank 0 is not up yet), says who it is, and gets the job's random
 * secret. Under mpirun or srun --mpi=pmix (PMIX_RANK set, gice built with libpmix-dev) rank,
 * size and exchanges come from PMIx instead; GICE_WORLD_SIZE, when set, wins over PMIx (gicerun
 * run under another launcher). A process that is one of N > 1 tasks of a launcher without PMIx
 * (srun without --mpi=pmix: SLURM_STEP_NUM_TASKS; PMI_SIZE; OMPI_COMM_WORLD_SIZE) fails with
 * GICE_ERR_CONFIG saying how to launch, rather than running as one of N one-rank jobs. Without
 * any of these the job is one rank.
 *
 * Every wait is bounded by GICE_BOOTSTRAP_TIMEOUT_MS, PMIx fences included (PMIX_TIMEOUT, and
 * our own deadline should the server ignore it): a rank that never arrives fails the others
 * with GICE_ERR_TIMED_OUT and a message naming it and the time waited; a rank that dies during
 * an exchange fails them with GICE_ERR_PEER_DEAD naming it (under PMIx: the ranks whose part
 * of the exchange is missing, probed for after the fence failed). Set-up path only: blocking
 * sockets, poll() with deadlines.
 */
#ifndef GICE_BOOTSTRAP_H
#define GICE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "emu/common/config.h"

typedef struct boot boot_t;

/* GICE_OK, GICE_ERR_CONFIG (bad variables, or one of N tasks with no PMIx), GICE_ERR_TIMED_OUT
 * (a rank missing), GICE_ERR_PEER_DEAD (a rank closed its connection or died), GICE_ERR_IO. */
int boot_init(boot_t **out);
void boot_fini(boot_t *b);
uint32_t boot_rank(const boot_t *b);
uint32_t boot_size(const boot_t *b);
uint64_t boot_secret(const boot_t *b);
/* This rank's CLOCK_MONOTONIC against rank 0's, found at boot_init: rank 0's clock = ours +
 * *offset_ns, within +- *bound_ns. Under gicerun, the shortest of a few pings over the rendezvous
 * socket (bound: half its round trip); under PMIx, exact on rank 0's machine (the same boot id)
 * and pinged over a socket rank 0 opens for it from other machines (GICE_CLOCK_SYNC). 1 when
 * known (rank 0, a one-rank job: offset 0, bound 0), 0 when not (GICE_CLOCK_SYNC=off, or rank 0
 * could not be reached). */
int boot_clock(const boot_t *b, int64_t *offset_ns, uint64_t *bound_ns);
/* Collective: every rank gives len bytes; all receives size * len bytes in rank order. */
int boot_allgather(boot_t *b, const void *mine, size_t len, void *all);
int boot_barrier(boot_t *b);

/* GICE_RANK, GICE_WORLD_SIZE, GICE_BOOTSTRAP, GICE_BOOTSTRAP_TIMEOUT_MS. */
extern const gice_param_t boot_params[];
/* GICE_CLOCK_SYNC (boot_clock.c). */
extern const gice_param_t boot_clock_params[];

#endif
