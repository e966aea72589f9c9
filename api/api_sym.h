/* api_sym.h: what api_sym.c (symmetric heap, symmetric counters), api_team.c (teams, team
 * barriers) and api_wait.c share. Not for other modules. */
#ifndef GICE_API_SYM_H
#define GICE_API_SYM_H

#include "api/api_internal.h"

#define API_SYM_MAX_LOCAL 16u  /* devices of one process in the symmetric heap */
#define API_TEAM_ROUNDS_MAX 16u /* dissemination rounds: teams of up to 2^16 devices */

/* The symmetric heap of one device of this process. */
struct api_sym_dev {
	gice_device_t *dev;
	uint8_t *base;      /* the heap in its memory */
	uint64_t key;       /* the heap's registration */
	gice_conn_t *conn;  /* by device id (max_gids): a connection to that device */
	int closed;         /* the device closed before gice_sym_fini */
};

struct api_sym_block {
	uint64_t off, len;
};

/* The process's symmetric state: set up and torn down by collectives (gice_sym_init, _fini),
 * read without a lock by kernels in between (a launch orders them after the set-up). */
struct api_sym_state {
	int on;
	uint64_t heap_bytes;
	uint32_t n_world;
	uint32_t *world_gids;   /* sorted: the world team's order */
	uint64_t *key_of;       /* by device id: its heap's key (0: not in the heap) */
	uint64_t *devoff_of;    /* by device id: where its heap starts in its memory */
	uint8_t **ptr_of;       /* by device id: its heap mapped here (NVLink plane), or NULL */
	uint32_t n_local;
	struct api_sym_dev local[API_SYM_MAX_LOCAL];
	struct api_sym_block *blocks; /* allocations, by offset */
	uint32_t n_blocks, cap_blocks;
	gice_team_t *world;
	gice_team_t *teams; /* the world and every split still alive */
};

struct api_team_local {
	gice_device_t *dev;
	uint32_t rank;
	_Atomic uint64_t epoch; /* team barriers this device has entered */
};

struct gice_team {
	uint32_t n;
	uint32_t *gids;  /* by team rank */
	uint32_t rounds; /* ceil(log2 n) */
	gice_counter_t bar[API_TEAM_ROUNDS_MAX]; /* symmetric counters, one per round */
	uint32_t n_local;
	struct api_team_local local[API_SYM_MAX_LOCAL];
	gice_team_t *next; /* api_sym.teams: every team of this process, freed by gice_sym_fini */
	struct api_coll *coll; /* gice_coll_init (api/coll.h), NULL before */
};

extern struct api_sym_state api_sym;

extern const gice_param_t api_sym_params[];

/* This process's symmetric state of device d, or NULL (also once d closed). */
static inline struct api_sym_dev *api_sym_dev(const gice_device_t *d)
{
	for (uint32_t i = 0; i < api_sym.n_local; i++)
		if (api_sym.local[i].dev == d && !api_sym.local[i].closed)
			return &api_sym.local[i];
	return NULL;
}

/* Team rank of d in t, -1 when not a member. */
static inline int32_t api_team_local_rank(const gice_team_t *t, const gice_device_t *d, uint32_t *li)
{
	for (uint32_t i = 0; t && i < t->n_local; i++)
		if (t->local[i].dev == d) {
			if (li)
				*li = i;
			return (int32_t)t->local[i].rank;
		}
	return -1;
}

/* api_sym.c: a collective exchange of len bytes per rank (gice_allgather, or a copy in a job of
 * one rank) */
int api_sym_exchange(const void *mine, size_t len, void *all);
/* api_team.c: a team of the n devices gids (team rank order), with its barrier counters;
 * collective (symmetric counters). */
int api_team_make(const uint32_t *gids, uint32_t n, gice_team_t **out);
void api_team_free(gice_team_t *t);
/* gice_sym_fini; drain 0 (gice_finalize of a program that did not call it): no quiet, no
 * meeting of the ranks, which may be gone. */
int api_sym_fini(int drain);
/* gice_device_close: d leaves the symmetric state (its heap goes with its memory). */
void api_sym_device_closed(gice_device_t *d);

#endif
