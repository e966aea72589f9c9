/* coll.h: what the collectives' files share (coll_init.c: set-up, parameters; coll_api.c:
 * checks, dispatch; coll_types.c: element types and reductions; coll_small.c: one-shot;
 * coll_ring.c: the pipelined ring; coll_direct.c: broadcast and the all-to-alls). Not for other
 * modules. */
#ifndef GICE_COLL_H
#define GICE_COLL_H

#include "api/api_sym.h"

enum coll_algo { COLL_ALGO_AUTO, COLL_ALGO_ONESHOT, COLL_ALGO_RING };

/* Symmetric counters of a team's collectives (the same ids on every device). */
enum {
	COLL_C_SMALL0, /* one-shot arrivals of calls of even parity */
	COLL_C_SMALL1, /* ... of odd parity */
	COLL_C_RS,     /* ring: reduce-scatter chunks landed in the scratch (from the left) */
	COLL_C_AG,     /* ring: allgather chunks landed in recv (from the left) */
	COLL_C_CREDIT, /* ring: rounds the right neighbour finished reducing (its bank is free) */
	COLL_C_DONE,   /* this device's puts completed */
	COLL_C_XCHG,   /* alltoallv: displacements landed (from every other device) */
	COLL_N_CTRS
};

/* Per device of this process in the team: how far its counters went (counters only grow; a
 * collective waits for base + what it expects). Touched only by the device's collective, one at
 * a time. */
struct coll_local {
	uint64_t small_calls;    /* one-shot collectives so far */
	uint64_t small_seen[2];  /* arrivals consumed, by parity */
	uint64_t rs, ag;         /* ring chunks consumed */
	uint64_t rounds;         /* ring rounds done (a round fills one bank of the right's scratch) */
	uint64_t done;           /* puts issued (COLL_C_DONE reaches it when they completed) */
	uint64_t xchg;           /* alltoallv displacements received */
};

struct api_coll {
	uint64_t scratch, scratch_bytes;  /* heap offset and size */
	uint64_t small_off, small_slot;   /* one-shot: 2 x n slots of small_slot bytes at small_off */
	uint64_t ring_off, ring_bank;     /* ring: 2 banks of ring_bank bytes at ring_off */
	uint64_t xchg_off;                /* alltoallv: n displacements out, then n in (uint64) */
	uint64_t chunk_bytes, small_max;  /* GICE_CHUNK_BYTES, GICE_COLL_SMALL_BYTES (clipped) */
	enum coll_algo algo;              /* GICE_ALGO */
	uint32_t *ring;                   /* ring order: ring[p] is the team rank at ring position p */
	uint32_t *ring_pos;               /* its inverse: ring_pos[team rank] */
	gice_counter_t c[COLL_N_CTRS];
	struct coll_local local[API_SYM_MAX_LOCAL]; /* like gice_team.local */
};

enum coll_kind {
	COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_REDUCE, COLL_BROADCAST, COLL_ALLTOALL, COLL_ALLTOALLV
};

#define COLL_V_MAX 64u /* alltoallv from the host: the arrays travel with the launch */

/* One collective call, as a kernel runs it. count as the public call takes it. */
struct coll_call {
	gice_team_t *team;
	uint64_t send, recv;
	size_t count;
	gice_dtype_t type;
	gice_redop_t op;
	enum coll_kind kind;
	uint32_t root; /* reduce, broadcast */
	/* alltoallv: n entries each, in elements (the host form's copies follow the call: packed) */
	const size_t *scnt, *sdsp, *rdsp;
	int packed;
};

extern const gice_param_t api_coll_params[];

/* coll_types.c */
/* dst[i] = a[i] op b[i], i < n (avg sums); dst may be a. */
void coll_reduce(void *dst, const void *a, const void *b, size_t n, gice_dtype_t type, gice_redop_t op);
/* dst[i] /= div (avg's last step; floating types only). */
void coll_scale(void *dst, size_t n, gice_dtype_t type, uint32_t div);
const char *coll_dtype_name(gice_dtype_t type);
const char *coll_redop_name(gice_redop_t op);
/* float16 / bfloat16 <-> float (round to nearest even). */
float coll_f16_to_f32(uint16_t h);
uint16_t coll_f32_to_f16(float f);
float coll_bf16_to_f32(uint16_t h);
uint16_t coll_f32_to_bf16(float f);

/* Run call c on device k->dev (team rank me, n > 1). GICE_OK or the failure (already reported
 * through gice_kernel_fail by the wait that saw it, or logged here).
 * coll_small.c: the one-shot allreduce. coll_ring.c: allreduce, reduce_scatter, allgather,
 * reduce. coll_direct.c: broadcast (a pipelined chain), alltoall (direct). */
int coll_allreduce_oneshot(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
			   uint32_t me);
int coll_ring(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me);
int coll_broadcast(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me);
int coll_alltoall(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me);
int coll_alltoallv(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me);

/* coll_api.c: wait until counter ctr of this device reaches v: looks with a yield between (more
 * ranks than cores: the peer that will signal may need this core), then gice_wait_until (its
 * stall timeout; a failure also fails the kernel). */
int coll_wait(gice_kctx_t *k, gice_counter_t ctr, uint64_t v);

/* api_team.c frees a team's collective state with it. */
void api_coll_free(gice_team_t *t);

#endif
