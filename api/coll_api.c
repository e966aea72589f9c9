/* coll_api.c: the collectives' set-up (gice_coll_init: scratch in the symmetric heap, symmetric
 * counters), their parameters, the checks every call makes, the choice of algorithm, and the
 * host entry points that enqueue a one-block kernel on a stream (as ncclAllReduce). */
#include "api/coll.h"

#include <sched.h>
#include <stdio.h>
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
	{"GICE_TOPO", "auto",
	 "ring order of the ring collectives: auto (the team's ranks grouped by host, each host's in rank "
	 "order, so that the NVLink plane carries all but one step per host), rank (team rank order), or a "
	 "file path (with a '/'): a static ring of global device ids (gice_device_id), separated by spaces, "
	 "commas or newlines, '#' to the end of a line a comment, the same file on every rank; a team "
	 "takes the ring's devices in the file's order, then any the file leaves out in rank order",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_COLL_SCRATCH_BYTES", "4m",
	 "symmetric heap taken by gice_coll_init per team: one-shot slots and the ring's two landing banks",
	 GICE_PARAM_SIZE, 64ull << 10, 16ull << 30},
	{NULL, NULL, NULL, 0, 0, 0},
};

static uint64_t round_down(uint64_t x, uint64_t a) { return x / a * a; }

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

void api_coll_free(gice_team_t *t)
{
	if (!t || !t->coll)
		return;
	for (int i = 0; i < COLL_N_CTRS; i++)
		gice_sym_counter_free(t->coll->c[i]);
	free(t->coll->ring);
	free(t->coll->ring_pos);
	free(t->coll); /* its scratch stays in the heap: the allocators of every rank stay in step */
	t->coll = NULL;
}

/* GICE_TOPO=PATH: the global device ids the file lists, in order (*ids, *n; both may be NULL to
 * only check it). GICE_ERR_CONFIG, logged with the file and the token, when it cannot be read,
 * holds something other than ids, or lists an id twice. */
static int coll_topo_file(const char *path, uint32_t **ids, uint32_t *n)
{
	FILE *f = fopen(path, "r");
	uint32_t *v = NULL, cnt = 0, cap = 0;
	char tok[64];
	int c, len = 0, rc = GICE_OK;

	if (!f) {
		gice_error("api", "GICE_TOPO=%s: cannot read the ring file: %m", path);
		return GICE_ERR_CONFIG;
	}
	do {
		c = fgetc(f);
		if (c == '#')
			while (c != '\n' && c != EOF)
				c = fgetc(f);
		if (c != EOF && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ',') {
			if (len < (int)sizeof(tok) - 1)
				tok[len++] = (char)c;
			continue;
		}
		if (!len)
			continue;
		tok[len] = 0;
		len = 0;
		char *end;
		unsigned long id = strtoul(tok, &end, 10);
		if (*end || tok[0] == '-' || id >= api_g.max_gids) {
			gice_error("api", "GICE_TOPO=%s: \"%s\" is not a global device id (0..%llu)", path, tok,
				   (unsigned long long)api_g.max_gids - 1);
			rc = GICE_ERR_CONFIG;
			break;
		}
		for (uint32_t i = 0; i < cnt; i++)
			if (v[i] == id) {
				gice_error("api", "GICE_TOPO=%s: device %lu is listed twice", path, id);
				rc = GICE_ERR_CONFIG;
			}
		if (rc)
			break;
		if (cnt == cap) {
			uint32_t *g = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!g) {
				rc = GICE_ERR_NO_MEMORY;
				break;
			}
			v = g;
		}
		v[cnt++] = (uint32_t)id;
	} while (c != EOF);
	fclose(f);
	if (rc || !ids) {
		free(v);
		return rc;
	}
	*ids = v;
	*n = cnt;
	return GICE_OK;
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
	const char *topo = gice_param_str(gice_param_find(api_coll_params, "GICE_TOPO"));
	if (strchr(topo, '/')) /* a static ring: read and checked here, before any collective step */
		return coll_topo_file(topo, NULL, NULL);
	if (strcmp(topo, "auto") && strcmp(topo, "rank")) {
		gice_error("api", "GICE_TOPO=%s: not auto, rank or a file path (with a '/')", topo);
		return GICE_ERR_CONFIG;
	}
	return GICE_OK;
}

/* Host identity of device g (same string: same host), from what every rank learned of every
 * device at its open: the same answer on every rank. Under api_g.lock. */
static const char *coll_host_of(uint32_t g)
{
	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->gid == g)
			return api_g.host;
	for (uint32_t i = 0; i < api_g.n_remote; i++)
		if (api_g.remote[i].gid == g)
			return api_g.remote[i].host;
	return "";
}

/* The ring order of team (GICE_TOPO): auto groups the ranks by host, hosts in order of their
 * lowest rank, each host's ranks in rank order; a file gives it (then the team's devices it leaves
 * out, in rank order, warned); every rank computes the same. */
static int coll_ring_order(gice_team_t *team, struct api_coll *st)
{
	const char *topo = gice_param_str(gice_param_find(api_coll_params, "GICE_TOPO"));
	uint32_t n = team->n, p = 0;

	if (!(st->ring = calloc(n, sizeof(uint32_t))) || !(st->ring_pos = malloc(n * sizeof(uint32_t))))
		return GICE_ERR_NO_MEMORY;
	for (uint32_t r = 0; r < n; r++)
		st->ring_pos[r] = UINT32_MAX;
	if (strchr(topo, '/')) {
		uint32_t *ids, nids, left = 0;
		int rc = coll_topo_file(topo, &ids, &nids); /* read once already: it failing now is a race */
		if (rc)
			return rc;
		for (uint32_t i = 0; i < nids; i++)
			for (uint32_t r = 0; r < n; r++)
				if (team->gids[r] == ids[i] && st->ring_pos[r] == UINT32_MAX) {
					st->ring_pos[r] = p;
					st->ring[p++] = r;
				}
		free(ids);
		for (uint32_t r = 0; r < n; r++)
			if (st->ring_pos[r] == UINT32_MAX) {
				st->ring_pos[r] = p;
				st->ring[p++] = r;
				left++;
			}
		if (left)
			gice_warn("api", "gice_coll_init: GICE_TOPO=%s leaves out %u of the team's %u devices: they follow "
					 "in rank order", topo, left, n);
	}
	pthread_mutex_lock(&api_g.lock);
	for (uint32_t r = 0; r < n; r++) {
		if (st->ring_pos[r] != UINT32_MAX)
			continue;
		const char *h = coll_host_of(team->gids[r]);
		for (uint32_t q = r; q < n; q++)
			if (st->ring_pos[q] == UINT32_MAX &&
			    (strcmp(topo, "rank") ? !strcmp(coll_host_of(team->gids[q]), h) : q == r)) {
				st->ring_pos[q] = p;
				st->ring[p++] = q;
			}
	}
	pthread_mutex_unlock(&api_g.lock);
	char text[128];
	int len = 0;
	for (uint32_t i = 0; i < n && i < 16 && len < (int)sizeof(text) - 12; i++)
		len += snprintf(text + len, sizeof(text) - (size_t)len, " %u", st->ring[i]);
	gice_debug("api", "gice_coll_init: team of %u: ring order (GICE_TOPO=%s):%s%s", n, topo, text,
		   n > 16 ? " ..." : "");
	return GICE_OK;
}

int gice_coll_init(gice_team_t *team)
{
	struct api_coll *st;
	int rc, n_ctrs = 0;

	if (!api_sym.on) {
		gice_error("api", "gice_coll_init: no symmetric heap (gice_sym_init first)");
		return GICE_ERR_INVALID;
	}
	if (team && team->coll) {
		gice_error("api", "gice_coll_init: the team of %u already has its collectives", team->n);
		return GICE_ERR_INVALID;
	}
	if (!(st = calloc(1, sizeof(*st))))
		return GICE_ERR_NO_MEMORY; /* before any collective step: the ranks that go on stay in step */
	if ((rc = coll_read_params(st)))
		goto free_st;
	/* every rank allocates, member or not: heap offsets and counter ids stay the same everywhere */
	if ((rc = gice_sym_alloc(st->scratch_bytes, &st->scratch)))
		goto free_st;
	for (; n_ctrs < COLL_N_CTRS; n_ctrs++)
		if ((rc = gice_sym_counter_alloc(&st->c[n_ctrs])))
			goto free_ctrs; /* a collective failure: every rank undoes alike */
	if (!team) {
		free(st);
		return GICE_OK;
	}
	/* one-shot: 2 banks (call parity) x n slots; at most a quarter of the scratch */
	st->small_slot = round_down(st->scratch_bytes / 4 / (2ull * team->n), 256);
	if (st->small_max < st->small_slot)
		st->small_slot = (st->small_max + 255) / 256 * 256;
	st->small_off = st->scratch;
	st->xchg_off = st->scratch + 2ull * team->n * st->small_slot;
	st->ring_off = st->xchg_off + (16ull * team->n + 255) / 256 * 256;
	if (st->ring_off - st->scratch > st->scratch_bytes) {
		gice_error("api", "gice_coll_init: %llu bytes of scratch (GICE_COLL_SCRATCH_BYTES) for a team of %u",
			   (unsigned long long)st->scratch_bytes, team->n);
		rc = GICE_ERR_NO_MEMORY; /* every member finds the same */
		goto free_ctrs;
	}
	st->ring_bank = round_down((st->scratch_bytes - (st->ring_off - st->scratch)) / 2, 256);
	if ((rc = coll_ring_order(team, st)))
		goto free_ctrs; /* every member finds the same */
	team->coll = st;
	return GICE_OK;

free_ctrs:
	while (n_ctrs--)
		gice_sym_counter_free(st->c[n_ctrs]);
	gice_sym_free(st->scratch);
free_st:
	free(st->ring);
	free(st->ring_pos);
	free(st);
	return rc;
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
