/* coll_api.c: the collectives' set-up (gice_coll_init: scratch in the symmetric heap, symmetric
 * counters), their parameters, the checks every call makes, the choice of algorithm, and the
 * host entry points that enqueue a one-block kernel on a stream (as ncclAllReduce). */
#include "api/coll.h"

#include <stdlib.h>
#include <string.h>

const gice_param_t api_coll_params[] = {
	{"GICE_ALGO", "auto",
	 "allreduce algorithm: auto (oneshot up to GICE_COLL_SMALL_BYTES, else ring), oneshot (every rank "
	 "puts its buffer to every other; sizes past the one-shot slot fall back to ring), ring (pipelined "
	 "reduce-scatter + allgather)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CHUNK_BYTES", "128k",
	 "ring collectives: bytes per chunk (a chunk's arrival triggers its reduction and the reduction's "
	 "completion the next send)",
	 GICE_PARAM_SIZE, 256, 1ull << 30},
	{"GICE_COLL_SMALL_BYTES", "16k",
	 "allreduce: largest buffer the one-shot algorithm takes under GICE_ALGO=auto (its slots are also "
	 "clipped to a quarter of the scratch over 2 x team size)",
	 GICE_PARAM_SIZE, 0, 1ull << 30},
	{"GICE_COLL_SCRATCH_BYTES", "4m",
	 "symmetric heap taken by gice_coll_init per team: one-shot slots and the ring's two landing banks",
	 GICE_PARAM_SIZE, 64ull << 10, 16ull << 30},
	{NULL, NULL, NULL, 0, 0, 0},
};

static uint64_t round_down(uint64_t x, uint64_t a) { return x / a * a; }

void api_coll_free(gice_team_t *t)
{
	if (!t || !t->coll)
		return;
	for (int i = 0; i < COLL_N_CTRS; i++)
		gice_sym_counter_free(t->coll->c[i]);
	free(t->coll); /* its scratch stays in the heap: the allocators of every rank stay in step */
	t->coll = NULL;
}

static int coll_read_params(struct api_coll *st)
{
	uint64_t v;
	const char *algo = gice_param_str(gice_param_find(api_coll_params, "GICE_ALGO"));
	int rc;

	if ((rc = gice_param_u64(gice_param_find(api_coll_params, "GICE_COLL_SCRATCH_BYTES"), &v)))
		return rc;
	st->scratch_bytes = round_down(v, 256);
	if ((rc = gice_param_u64(gice_param_find(api_coll_params, "GICE_CHUNK_BYTES"), &st->chunk_bytes)) ||
	    (rc = gice_param_u64(gice_param_find(api_coll_params, "GICE_COLL_SMALL_BYTES"), &st->small_max)))
		return rc;
	if (!strcmp(algo, "auto"))
		st->algo = COLL_ALGO_AUTO;
	else if (!strcmp(algo, "oneshot"))
		st->algo = COLL_ALGO_ONESHOT;
	else if (!strcmp(algo, "ring"))
		st->algo = COLL_ALGO_RING;
	else {
		gice_error("api", "GICE_ALGO=%s: not auto, oneshot or ring", algo);
		return GICE_ERR_CONFIG;
	}
	return GICE_OK;
}

int gice_coll_init(gice_team_t *team)
{
	struct api_coll tmp = {0}, *st;
	int rc;

	if (!api_sym.on) {
		gice_error("api", "gice_coll_init: no symmetric heap (gice_sym_init first)");
		return GICE_ERR_INVALID;
	}
	if (team && team->coll) {
		gice_error("api", "gice_coll_init: the team of %u already has its collectives", team->n);
		return GICE_ERR_INVALID;
	}
	if ((rc = coll_read_params(&tmp)))
		return rc;
	/* every rank allocates, member or not: heap offsets and counter ids stay the same everywhere */
	if ((rc = gice_sym_alloc(tmp.scratch_bytes, &tmp.scratch)))
		return rc;
	for (int i = 0; i < COLL_N_CTRS; i++)
		if ((rc = gice_sym_counter_alloc(&tmp.c[i])))
			return rc;
	if (!team)
		return GICE_OK;
	if (!(st = malloc(sizeof(*st))))
		return GICE_ERR_NO_MEMORY;
	*st = tmp;
	/* one-shot: 2 banks (call parity) x n slots; at most a quarter of the scratch */
	st->small_slot = round_down(st->scratch_bytes / 4 / (2ull * team->n), 256);
	if (st->small_max < st->small_slot)
		st->small_slot = (st->small_max + 255) / 256 * 256;
	st->small_off = st->scratch;
	st->ring_off = st->scratch + 2ull * team->n * st->small_slot;
	st->ring_bank = round_down((st->scratch_bytes - 2ull * team->n * st->small_slot) / 2, 256);
	team->coll = st;
	return GICE_OK;
}

/* The checks of every call, on the host and in a kernel. *li: the device's index in team. */
static int coll_check(const gice_device_t *d, const gice_team_t *team, const struct coll_call *c, uint32_t *li,
		      const char *who)
{
	size_t esz = gice_dtype_size(c->type);
	uint64_t bytes = (uint64_t)c->count * esz;

	if (!team || !team->coll) {
		gice_error("api", "%s: %s", who, !team ? "no team" : "no gice_coll_init on this team");
		return GICE_ERR_INVALID;
	}
	if (api_team_local_rank(team, d, li) < 0) {
		gice_error("api", "%s: device %u is not in the team", who, d->gid);
		return GICE_ERR_INVALID;
	}
	if (!esz || (unsigned)c->op >= GICE_REDOP_COUNT) {
		gice_error("api", "%s: bad type %d or op %d", who, (int)c->type, (int)c->op);
		return GICE_ERR_INVALID;
	}
	if (c->op == GICE_RED_AVG && c->type < GICE_FLOAT16) {
		gice_error("api", "%s: avg is for floating types, not %s", who, coll_dtype_name(c->type));
		return GICE_ERR_INVALID;
	}
	if (c->count > api_sym.heap_bytes || c->send > api_sym.heap_bytes || c->recv > api_sym.heap_bytes ||
	    bytes > api_sym.heap_bytes - c->send || bytes > api_sym.heap_bytes - c->recv) {
		gice_error("api", "%s: %zu %s at offsets %llu and %llu: outside the %llu-byte symmetric heap", who,
			   c->count, coll_dtype_name(c->type), (unsigned long long)c->send, (unsigned long long)c->recv,
			   (unsigned long long)api_sym.heap_bytes);
		return GICE_ERR_OUT_OF_BOUNDS;
	}
	return GICE_OK;
}

static int coll_allreduce_run(gice_kctx_t *k, const struct coll_call *c)
{
	struct api_coll *st;
	uint32_t li, n, me;
	size_t bytes = c->count * gice_dtype_size(c->type);
	int rc = coll_check(k->dev, c->team, c, &li, "gice_coll_allreduce");

	if (rc)
		goto fail;
	if (!c->count)
		return GICE_OK;
	st = c->team->coll;
	n = c->team->n;
	me = c->team->local[li].rank;
	if (n == 1) {
		if (c->send != c->recv)
			memcpy(gice_sym_ptr(k->dev, c->recv), gice_sym_ptr(k->dev, c->send), bytes);
		return GICE_OK;
	}
	enum coll_algo a = st->algo;
	if (a == COLL_ALGO_AUTO)
		a = bytes <= st->small_max ? COLL_ALGO_ONESHOT : COLL_ALGO_RING;
	if (a == COLL_ALGO_ONESHOT && bytes > st->small_slot)
		a = COLL_ALGO_RING;
	rc = a == COLL_ALGO_ONESHOT ? coll_allreduce_oneshot(k, c, st, &st->local[li], me)
				    : coll_allreduce_ring(k, c, st, &st->local[li], me);
	if (!rc)
		return GICE_OK;
fail:
	gice_kernel_fail(k, rc, "gice_coll_allreduce");
	return rc;
}

int gice_coll_allreduce_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type, gice_redop_t op)
{
	struct coll_call c = {.team = team, .send = send, .recv = recv, .count = count, .type = type, .op = op};

	return coll_allreduce_run(k, &c);
}

static void coll_allreduce_kernel(gice_kctx_t *k, void *args) { coll_allreduce_run(k, args); }

int gice_coll_allreduce(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type, gice_redop_t op)
{
	struct coll_call c = {.team = team, .send = send, .recv = recv, .count = count, .type = type, .op = op};
	int rc;

	if (!s)
		return GICE_ERR_INVALID;
	if ((rc = coll_check(s->dev, team, &c, NULL, "gice_coll_allreduce")))
		return rc;
	return gice_launch(s, coll_allreduce_kernel, 1, &c, sizeof(c));
}
