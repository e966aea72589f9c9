/* coll_api.c: the checks every collective call makes, the choice of algorithm, and the host
 * entry points that enqueue a one-block kernel on a stream (as ncclAllReduce); the set-up is
 * coll_init.c's. */
#include "api/coll.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int coll_wait(gice_kctx_t *k, gice_counter_t ctr, uint64_t v)
{
	int rc = 0;

	/* a yield, not a pause: with two ranks per core the one that will signal is often waiting
	 * for this core (4 ranks on 2 cores: 8 B allreduce 5.0 -> 2.9 us); alone on its core a
	 * yield returns at once */
	for (int i = 0; i < 96 && (rc = gice_signal_test(k, ctr, GICE_CMP_GE, v)) == 0; i++)
		sched_yield();
	if (rc == 1)
		return GICE_OK;
	return gice_wait_until(k, ctr, GICE_CMP_GE, v, 0, NULL);
}

static const char *const kind_name[] = {
	[COLL_ALLREDUCE] = "gice_coll_allreduce", [COLL_REDUCE_SCATTER] = "gice_coll_reduce_scatter",
	[COLL_ALLGATHER] = "gice_coll_allgather", [COLL_REDUCE] = "gice_coll_reduce",
	[COLL_BROADCAST] = "gice_coll_broadcast", [COLL_ALLTOALL] = "gice_coll_alltoall",
	[COLL_ALLTOALLV] = "gice_coll_alltoallv",
};

/* alltoallv: every block of send, and this device's own block of recv, inside the heap. */
static int coll_check_v(const gice_device_t *d, const struct coll_call *c, uint32_t n, size_t esz)
{
	uint64_t heap = api_sym.heap_bytes, me = (uint64_t)api_team_local_rank(c->team, d, NULL);
	uint64_t hs = c->send <= heap ? (heap - c->send) / esz : 0, hr = c->recv <= heap ? (heap - c->recv) / esz : 0;

	for (uint32_t j = 0; j < n; j++)
		if (c->scnt[j] > hs || c->sdsp[j] > hs - c->scnt[j] || c->rdsp[j] > heap / esz) {
			gice_error("api", "gice_coll_alltoallv: block %u (%zu %s at %zu, lands at %zu): outside the "
				   "%llu-byte symmetric heap", j, c->scnt[j], coll_dtype_name(c->type), c->sdsp[j],
				   c->rdsp[j], (unsigned long long)heap);
			return GICE_ERR_OUT_OF_BOUNDS;
		}
	if (c->scnt[me] > hr || c->rdsp[me] > hr - c->scnt[me]) {
		gice_error("api", "gice_coll_alltoallv: own block (%zu at %zu) past the heap", c->scnt[me], c->rdsp[me]);
		return GICE_ERR_OUT_OF_BOUNDS;
	}
	return GICE_OK;
}

/* The checks of every call, on the host and in a kernel. *li: the device's index in team. */
static int coll_check(const gice_device_t *d, const struct coll_call *c, uint32_t *li)
{
	const gice_team_t *team = c->team;
	const char *who = kind_name[c->kind];
	size_t esz = gice_dtype_size(c->type);
	int reduces = c->kind == COLL_ALLREDUCE || c->kind == COLL_REDUCE_SCATTER || c->kind == COLL_REDUCE;

	if (!team || !team->coll) {
		gice_error("api", "%s: %s", who, !team ? "no team" : "no gice_coll_init on this team");
		return GICE_ERR_INVALID;
	}
	if (api_team_local_rank(team, d, li) < 0) {
		gice_error("api", "%s: device %u is not in the team", who, d->gid);
		return GICE_ERR_INVALID;
	}
	if (!esz || (reduces && (unsigned)c->op >= GICE_REDOP_COUNT)) {
		gice_error("api", "%s: bad type %d or op %d", who, (int)c->type, (int)c->op);
		return GICE_ERR_INVALID;
	}
	if (reduces && c->op == GICE_RED_AVG && c->type < GICE_FLOAT16) {
		gice_error("api", "%s: avg is for floating types, not %s", who, coll_dtype_name(c->type));
		return GICE_ERR_INVALID;
	}
	if ((c->kind == COLL_REDUCE || c->kind == COLL_BROADCAST) && c->root >= team->n) {
		gice_error("api", "%s: root %u out of range (team of %u)", who, c->root, team->n);
		return GICE_ERR_INVALID;
	}
	if (c->kind == COLL_ALLTOALLV && (!c->scnt || !c->sdsp || !c->rdsp)) {
		gice_error("api", "%s: NULL counts or displacements", who);
		return GICE_ERR_INVALID;
	}
	if (c->kind == COLL_ALLTOALLV)
		return coll_check_v(d, c, team->n, esz);
	if (c->kind == COLL_ALLTOALL && c->send == c->recv && c->count && team->n > 1) {
		gice_error("api", "%s: in place is not supported (send == recv)", who);
		return GICE_ERR_INVALID;
	}
	/* bytes of send and recv */
	uint64_t n = team->n, sb = c->count * esz, rb = sb;
	if (c->kind == COLL_REDUCE_SCATTER || c->kind == COLL_ALLTOALL)
		sb *= n;
	if (c->kind == COLL_ALLGATHER || c->kind == COLL_ALLTOALL)
		rb *= n;
	if (c->count > api_sym.heap_bytes || c->send > api_sym.heap_bytes || c->recv > api_sym.heap_bytes ||
	    sb > api_sym.heap_bytes - c->send || rb > api_sym.heap_bytes - c->recv) {
		gice_error("api", "%s: %zu %s at offsets %llu and %llu: outside the %llu-byte symmetric heap", who,
			   c->count, coll_dtype_name(c->type), (unsigned long long)c->send, (unsigned long long)c->recv,
			   (unsigned long long)api_sym.heap_bytes);
		return GICE_ERR_OUT_OF_BOUNDS;
	}
	return GICE_OK;
}

/* One device's part of call c: checks, then the algorithm. */
static int coll_run(gice_kctx_t *k, const struct coll_call *c)
{
	struct api_coll *st;
	struct coll_local *l;
	uint32_t li, n, me;
	size_t esz = gice_dtype_size(c->type), bytes = c->count * esz;
	int rc = coll_check(k->dev, c, &li);

	if (rc)
		goto fail;
	api_faults_coll(k->dev); /* faults aimed at this collective (@collN) start here */
	if (!c->count && c->kind != COLL_ALLTOALLV)
		return GICE_OK;
	st = c->team->coll;
	l = &st->local[li];
	n = c->team->n;
	me = c->team->local[li].rank;
	if (n == 1 && c->kind == COLL_ALLTOALLV) {
		memmove((uint8_t *)gice_sym_ptr(k->dev, c->recv) + c->rdsp[0] * esz,
			(uint8_t *)gice_sym_ptr(k->dev, c->send) + c->sdsp[0] * esz, c->scnt[0] * esz);
		return GICE_OK;
	}
	if (n == 1) { /* a copy, or nothing */
		if (c->send != c->recv && (c->kind != COLL_REDUCE || me == c->root))
			memmove(gice_sym_ptr(k->dev, c->recv), gice_sym_ptr(k->dev, c->send), bytes);
		return GICE_OK;
	}
	/* these write a peer's recv at once: every device must be done with the call before */
	if (c->kind == COLL_ALLGATHER || c->kind == COLL_BROADCAST || c->kind == COLL_ALLTOALL ||
	    c->kind == COLL_ALLTOALLV)
		if ((rc = gice_team_sync(k, c->team)))
			goto fail;
	switch (c->kind) {
	case COLL_ALLREDUCE: {
		enum coll_algo a = st->algo;
		if (a == COLL_ALGO_AUTO)
			a = bytes <= st->small_max ? COLL_ALGO_ONESHOT : COLL_ALGO_RING;
		if (a == COLL_ALGO_ONESHOT && bytes > st->small_slot)
			a = COLL_ALGO_RING;
		rc = a == COLL_ALGO_ONESHOT ? coll_allreduce_oneshot(k, c, st, l, me) : coll_ring(k, c, st, l, me);
		break;
	}
	case COLL_BROADCAST:
		rc = coll_broadcast(k, c, st, l, me);
		break;
	case COLL_ALLTOALL:
		rc = coll_alltoall(k, c, st, l, me);
		break;
	case COLL_ALLTOALLV:
		rc = coll_alltoallv(k, c, st, l, me);
		break;
	default:
		rc = coll_ring(k, c, st, l, me);
		break;
	}
	if (!rc)
		return GICE_OK;
fail:
	gice_kernel_fail(k, rc, kind_name[c->kind]);
	return rc;
}

static void coll_kernel(gice_kctx_t *k, void *args)
{
	struct coll_call *c = args;

	if (c->packed) { /* the arrays came with the launch, after the call */
		const size_t *v = (const size_t *)(c + 1);
		c->scnt = v;
		c->sdsp = v + c->team->n;
		c->rdsp = v + 2 * c->team->n;
	}
	coll_run(k, c);
}

/* Host entry: check, then a one-block kernel on s. */
static int coll_enqueue(gice_stream_t *s, const struct coll_call *c)
{
	int rc;

	if (!s)
		return GICE_ERR_INVALID;
	if ((rc = coll_check(s->dev, c, NULL)))
		return rc;
	return gice_launch(s, coll_kernel, 1, c, sizeof(*c));
}

#define CALL(kind_, root_)                                                                                      \
	(struct coll_call)                                                                                      \
	{                                                                                                       \
		.team = team, .send = send, .recv = recv, .count = count, .type = type, .op = op, .kind = kind_, \
		.root = root_                                                                                   \
	}

int gice_coll_allreduce(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type, gice_redop_t op)
{
	return coll_enqueue(s, &CALL(COLL_ALLREDUCE, 0));
}

int gice_coll_allreduce_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type, gice_redop_t op)
{
	return coll_run(k, &CALL(COLL_ALLREDUCE, 0));
}

int gice_coll_reduce_scatter(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			     gice_dtype_t type, gice_redop_t op)
{
	return coll_enqueue(s, &CALL(COLL_REDUCE_SCATTER, 0));
}

int gice_coll_reduce_scatter_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			       gice_dtype_t type, gice_redop_t op)
{
	return coll_run(k, &CALL(COLL_REDUCE_SCATTER, 0));
}

int gice_coll_reduce(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		     gice_dtype_t type, gice_redop_t op, uint32_t root)
{
	return coll_enqueue(s, &CALL(COLL_REDUCE, root));
}

int gice_coll_reduce_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		       gice_dtype_t type, gice_redop_t op, uint32_t root)
{
	return coll_run(k, &CALL(COLL_REDUCE, root));
}

#define CALL_NOOP(kind_, root_)                                                                                 \
	(struct coll_call)                                                                                      \
	{                                                                                                       \
		.team = team, .send = send, .recv = recv, .count = count, .type = type, .op = GICE_RED_SUM,      \
		.kind = kind_, .root = root_                                                                    \
	}

int gice_coll_allgather(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type)
{
	return coll_enqueue(s, &CALL_NOOP(COLL_ALLGATHER, 0));
}

int gice_coll_allgather_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type)
{
	return coll_run(k, &CALL_NOOP(COLL_ALLGATHER, 0));
}

int gice_coll_broadcast(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type, uint32_t root)
{
	return coll_enqueue(s, &CALL_NOOP(COLL_BROADCAST, root));
}

int gice_coll_broadcast_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type, uint32_t root)
{
	return coll_run(k, &CALL_NOOP(COLL_BROADCAST, root));
}

int gice_coll_alltoall(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		       gice_dtype_t type)
{
	return coll_enqueue(s, &CALL_NOOP(COLL_ALLTOALL, 0));
}

int gice_coll_alltoall_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			 gice_dtype_t type)
{
	return coll_run(k, &CALL_NOOP(COLL_ALLTOALL, 0));
}

int gice_coll_alltoallv_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, const size_t *send_counts,
			  const size_t *send_displs, uint64_t recv, const size_t *recv_displs, gice_dtype_t type)
{
	struct coll_call c = {.team = team, .send = send, .recv = recv, .type = type, .kind = COLL_ALLTOALLV,
			      .scnt = send_counts, .sdsp = send_displs, .rdsp = recv_displs};

	return coll_run(k, &c);
}

int gice_coll_alltoallv(gice_stream_t *s, gice_team_t *team, uint64_t send, const size_t *send_counts,
			const size_t *send_displs, uint64_t recv, const size_t *recv_displs, gice_dtype_t type)
{
	struct {
		struct coll_call c;
		size_t v[3 * COLL_V_MAX];
	} a = {.c = {.team = team, .send = send, .recv = recv, .type = type, .kind = COLL_ALLTOALLV,
		     .scnt = send_counts, .sdsp = send_displs, .rdsp = recv_displs}};
	uint32_t n = team ? team->n : 0;
	int rc;

	if (!s)
		return GICE_ERR_INVALID;
	if (n > COLL_V_MAX) {
		gice_error("api", "gice_coll_alltoallv: a team of %u from the host (at most %u: use the kernel form)", n,
			   COLL_V_MAX);
		return GICE_ERR_UNSUPPORTED;
	}
	if ((rc = coll_check(s->dev, &a.c, NULL)))
		return rc;
	memcpy(a.v, send_counts, n * sizeof(size_t));
	memcpy(a.v + n, send_displs, n * sizeof(size_t));
	memcpy(a.v + 2 * n, recv_displs, n * sizeof(size_t));
	a.c.packed = 1;
	return gice_launch(s, coll_kernel, 1, &a, sizeof(a.c) + 3 * n * sizeof(size_t));
}

/* ---------------------------------------------------------------- persistent allreduce */

struct coll_persist {
	struct coll_call c;
	gice_counter_t trigger, done;
	uint64_t first, iters;
};

static void coll_persist_kernel(gice_kctx_t *k, void *args)
{
	const struct coll_persist *p = args;
	int rc = GICE_OK;

	for (uint64_t i = 0; i < p->iters && !rc; i++) {
		if ((rc = coll_wait(k, p->trigger, p->first + i)) || (rc = coll_run(k, &p->c)))
			break; /* the failure failed the kernel */
		gice_trigger_add(k, p->done, 1);
	}
}

int gice_coll_allreduce_persistent(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
				   gice_dtype_t type, gice_redop_t op, gice_counter_t trigger, uint64_t first,
				   uint64_t iters, gice_counter_t done)
{
	struct coll_persist p = {.c = CALL(COLL_ALLREDUCE, 0), .trigger = trigger, .done = done, .first = first,
				 .iters = iters};
	int rc;

	if (!s)
		return GICE_ERR_INVALID;
	if ((rc = coll_check(s->dev, &p.c, NULL)))
		return rc;
	if (trigger == GICE_NO_COUNTER || done == GICE_NO_COUNTER || !iters) {
		gice_error("api", "gice_coll_allreduce_persistent: trigger %u, done %u, %llu iterations", trigger, done,
			   (unsigned long long)iters);
		return GICE_ERR_INVALID;
	}
	return gice_launch(s, coll_persist_kernel, 1, &p, sizeof(p));
}
