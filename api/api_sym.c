/* api_sym.c: the symmetric heap (one region of the same size in every device's memory,
 * registered once, its keys exchanged once) and symmetric counters (one id allocated on every
 * device), set up by host collectives; the symmetric device operations (put, get, signal by
 * team rank and heap offset) that kernels call. */
#include "api/api_sym.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct api_sym_state api_sym;

#define SYM_ALIGN 256u

const gice_param_t api_sym_params[] = {
	{"GICE_SYM_HEAP_BYTES", "32m",
	 "symmetric heap per device (gice_sym_init with 0), rounded up to 64 KiB; taken from the communication "
	 "pool (GICE_COMM_POOL_BYTES) or, without one, from the device memory (GICE_HBM_BYTES)",
	 GICE_PARAM_SIZE, 64ull << 10, 64ull << 30},
	{NULL, NULL, NULL, 0, 0, 0},
};

int api_sym_exchange(const void *mine, size_t len, void *all)
{
	if (gice_world_size() == 1) {
		memcpy(all, mine, len);
		return GICE_OK;
	}
	return gice_allgather(mine, len, all);
}

/* ---------------------------------------------------------------- set-up */

/* What a rank tells the others at gice_sym_init. */
struct sym_blob {
	uint64_t heap_bytes;
	uint32_t n, pad;
	struct {
		uint32_t gid, pad;
		uint64_t key, devoff;
	} dev[API_SYM_MAX_LOCAL];
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void sym_release(void)
{
	for (uint32_t i = 0; i < api_sym.n_local; i++) {
		struct api_sym_dev *s = &api_sym.local[i];
		if (s->closed) /* its memory and connections went with it */
			continue;
		if (s->conn)
			for (uint32_t g = 0; g < api_g.max_gids; g++)
				if (s->conn[g] != UINT32_MAX)
					gice_conn_close(s->dev, s->conn[g]);
		if (s->key)
			gice_mem_deregister(s->dev, s->key);
		if (s->base)
			gice_mem_free(s->dev, s->base);
		free(s->conn);
	}
	free(api_sym.world_gids);
	free(api_sym.key_of);
	free(api_sym.devoff_of);
	free(api_sym.ptr_of);
	free(api_sym.blocks);
	memset(&api_sym, 0, sizeof(api_sym));
}

/* This process's devices get their heaps; *blob what the other ranks need of them. */
static int sym_local_heaps(uint64_t bytes, struct sym_blob *blob)
{
	int rc = GICE_OK;

	blob->heap_bytes = bytes;
	pthread_mutex_lock(&api_g.lock);
	for (uint64_t i = 0; i < api_g.max_devices && !rc; i++) {
		gice_device_t *d = api_g.devs[i];
		if (!d || !d->live)
			continue;
		if (api_sym.n_local == API_SYM_MAX_LOCAL) {
			gice_error("api", "gice_sym_init: more than %u devices open in this process", API_SYM_MAX_LOCAL);
			rc = GICE_ERR_UNSUPPORTED;
			break;
		}
		struct api_sym_dev *s = &api_sym.local[api_sym.n_local++];
		void *p = NULL;
		uint64_t off = 0;
		s->dev = d;
		/* communication memory: from the communication pool when GICE_COMM_POOL_BYTES sets one */
		if ((rc = gice_pool_alloc(d, GICE_POOL_COMM, bytes, &p))) {
			gice_error("api", "gice_sym_init: no room for a %llu-byte symmetric heap on device %u",
				   (unsigned long long)bytes, d->gid);
			break;
		}
		s->base = p;
		if ((rc = gice_mem_register(d, p, bytes, &s->key)) || (rc = gice_mem_offset(d, p, &off)))
			break;
		blob->dev[blob->n].gid = d->gid;
		blob->dev[blob->n].key = s->key;
		blob->dev[blob->n].devoff = off;
		blob->n++;
	}
	pthread_mutex_unlock(&api_g.lock);
	if (!rc && !blob->n) {
		gice_error("api", "gice_sym_init: no device is open");
		rc = GICE_ERR_INVALID;
	}
	return rc;
}

/* The world: every rank's devices; a connection from each device here to each of them. */
static int sym_wire(const struct sym_blob *all, uint32_t ranks)
{
	uint32_t n = 0;

	api_sym.key_of = calloc(api_g.max_gids, sizeof(uint64_t));
	api_sym.devoff_of = calloc(api_g.max_gids, sizeof(uint64_t));
	api_sym.ptr_of = calloc(api_g.max_gids, sizeof(uint8_t *));
	api_sym.world_gids = calloc(ranks * API_SYM_MAX_LOCAL, sizeof(uint32_t));
	if (!api_sym.key_of || !api_sym.devoff_of || !api_sym.ptr_of || !api_sym.world_gids)
		return GICE_ERR_NO_MEMORY;
	for (uint32_t r = 0; r < ranks; r++) {
		if (all[r].heap_bytes != all[0].heap_bytes) {
			gice_error("api", "gice_sym_init: rank %u asked for a %llu-byte heap, rank 0 for %llu bytes", r,
				   (unsigned long long)all[r].heap_bytes, (unsigned long long)all[0].heap_bytes);
			return GICE_ERR_INVALID;
		}
		for (uint32_t i = 0; i < all[r].n && i < API_SYM_MAX_LOCAL; i++) {
			uint32_t g = all[r].dev[i].gid;
			if (g >= api_g.max_gids)
				return GICE_ERR_INVALID;
			api_sym.key_of[g] = all[r].dev[i].key;
			api_sym.devoff_of[g] = all[r].dev[i].devoff;
			api_sym.world_gids[n++] = g;
		}
	}
	qsort(api_sym.world_gids, n, sizeof(uint32_t), cmp_u32);
	api_sym.n_world = n;
	/* NVLink plane: where each heap is mapped in this process, found once (no lock in kernels) */
	for (uint32_t j = 0; j < n; j++) {
		uint32_t g = api_sym.world_gids[j];
		api_sym.ptr_of[g] = gice_peer_ptr(api_sym.local[0].dev, g, api_sym.devoff_of[g], all[0].heap_bytes);
	}
	for (uint32_t i = 0; i < api_sym.n_local; i++) {
		struct api_sym_dev *s = &api_sym.local[i];
		if (!(s->conn = malloc(api_g.max_gids * sizeof(gice_conn_t))))
			return GICE_ERR_NO_MEMORY;
		memset(s->conn, 0xff, api_g.max_gids * sizeof(gice_conn_t));
		for (uint32_t j = 0; j < n; j++) {
			int rc = gice_conn_open(s->dev, api_sym.world_gids[j], NULL, &s->conn[api_sym.world_gids[j]]);
			if (rc) {
				gice_error("api", "gice_sym_init: device %u cannot reach device %u", s->dev->gid,
					   api_sym.world_gids[j]);
				return rc;
			}
		}
	}
	return GICE_OK;
}

int gice_sym_init(size_t heap_bytes)
{
	struct sym_blob mine = {0}, *all = NULL;
	uint64_t bytes = heap_bytes;
	uint32_t ranks = gice_world_size();
	int rc;

	if (!api_g.refs || api_sym.on) {
		gice_error("api", "gice_sym_init: %s", api_sym.on ? "already initialised" : "called before gice_init");
		return GICE_ERR_INVALID;
	}
	if (!bytes && (rc = gice_param_u64(gice_param_find(api_sym_params, "GICE_SYM_HEAP_BYTES"), &bytes)))
		return rc;
	bytes = (bytes + 65535) & ~65535ull;
	rc = sym_local_heaps(bytes, &mine);
	/* the exchange happens whatever happened here: the other ranks wait for it */
	if (!(all = calloc(ranks, sizeof(*all)))) {
		rc = GICE_ERR_NO_MEMORY;
		goto err;
	}
	mine.pad = rc ? 1u : 0u; /* a rank that failed says so: every rank fails alike */
	int xrc = api_sym_exchange(&mine, sizeof(mine), all);
	if (xrc) {
		rc = xrc;
		goto err;
	}
	for (uint32_t r = 0; r < ranks && !rc; r++)
		if (all[r].pad) {
			gice_error("api", "gice_sym_init: rank %u could not create its heaps", r);
			rc = GICE_ERR_INVALID;
		}
	if (rc || (rc = sym_wire(all, ranks)))
		goto err;
	api_sym.heap_bytes = bytes;
	api_sym.on = 1;
	uint32_t *gids = api_sym.world_gids;
	if ((rc = api_team_make(gids, api_sym.n_world, &api_sym.world)))
		goto err;
	free(all);
	gice_info("api", "symmetric heap: %llu bytes on each of %u devices (%u here)", (unsigned long long)bytes,
		  api_sym.n_world, api_sym.n_local);
	return GICE_OK;
err:
	free(all);
	sym_release();
	return rc;
}

int gice_sym_fini(void) { return api_sym_fini(1); }

int api_sym_fini(int drain)
{
	if (!api_sym.on)
		return GICE_ERR_INVALID;
	/* drain: the last barrier's signals may still be in flight to devices about to close */
	for (uint32_t i = 0; drain && i < api_sym.n_local; i++)
		if (!api_sym.local[i].closed) {
			int rc = gice_device_quiet(api_sym.local[i].dev, 0);
			if (rc)
				gice_debug("api", "gice_sym_fini: device %u: quiet: %s", api_sym.local[i].dev->gid,
					   gice_status_name(rc));
		}
	if (drain && gice_world_size() > 1)
		gice_barrier();
	while (api_sym.teams) /* the world and the splits not destroyed */
		api_team_free(api_sym.teams);
	sym_release();
	return GICE_OK;
}

uint64_t gice_sym_heap_bytes(void) { return api_sym.on ? api_sym.heap_bytes : 0; }

void *gice_sym_ptr(gice_device_t *d, uint64_t off)
{
	struct api_sym_dev *s = api_sym_dev(d);

	return s && off < api_sym.heap_bytes ? s->base + off : NULL;
}

/* ---------------------------------------------------------------- allocation */

/* First fit among the holes between allocations (kept sorted by offset): the same sequence of
 * calls gives the same offsets on every rank. */
static int heap_fit(uint64_t bytes, uint64_t *off, uint32_t *at)
{
	uint64_t prev = 0, best = 0;

	for (uint32_t i = 0; i <= api_sym.n_blocks; i++) {
		uint64_t end = i < api_sym.n_blocks ? api_sym.blocks[i].off : api_sym.heap_bytes;
		if (end - prev >= bytes) {
			*off = prev;
			*at = i;
			return GICE_OK;
		}
		best = GICE_MAX(best, end - prev);
		if (i < api_sym.n_blocks)
			prev = (api_sym.blocks[i].off + api_sym.blocks[i].len + SYM_ALIGN - 1) & ~(uint64_t)(SYM_ALIGN - 1);
	}
	gice_error("api", "gice_sym_alloc of %llu bytes: no room in the %llu-byte symmetric heap (largest hole %llu)",
		   (unsigned long long)bytes, (unsigned long long)api_sym.heap_bytes, (unsigned long long)best);
	return GICE_ERR_NO_MEMORY;
}

int gice_sym_alloc(size_t bytes, uint64_t *off)
{
	struct {
		uint64_t bytes;
		int64_t rc;
	} mine = {bytes, 0}, *all;
	uint32_t ranks = gice_world_size(), at = 0;
	uint64_t o = 0;
	int rc;

	if (!api_sym.on || !bytes) {
		gice_error("api", "gice_sym_alloc of %zu bytes: %s", bytes, !api_sym.on ? "no gice_sym_init" : "empty");
		return GICE_ERR_INVALID;
	}
	if (api_sym.n_blocks == api_sym.cap_blocks) {
		uint32_t cap = api_sym.cap_blocks ? 2 * api_sym.cap_blocks : 32;
		struct api_sym_block *b = realloc(api_sym.blocks, cap * sizeof(*b));
		if (!b)
			mine.rc = GICE_ERR_NO_MEMORY;
		else {
			api_sym.blocks = b;
			api_sym.cap_blocks = cap;
		}
	}
	if (!mine.rc)
		mine.rc = heap_fit(bytes, &o, &at);
	if (!(all = calloc(ranks, sizeof(*all))))
		return GICE_ERR_NO_MEMORY;
	if ((rc = api_sym_exchange(&mine, sizeof(mine), all)))
		goto out;
	for (uint32_t r = 0; r < ranks && !rc; r++) {
		if (all[r].bytes != bytes) {
			gice_error("api", "gice_sym_alloc: rank %u asked for %llu bytes, rank %u for %llu: nothing allocated",
				   r, (unsigned long long)all[r].bytes, gice_rank(), (unsigned long long)bytes);
			rc = GICE_ERR_INVALID;
		} else if (all[r].rc) {
			rc = (int)all[r].rc;
		}
	}
	if (rc)
		goto out;
	memmove(&api_sym.blocks[at + 1], &api_sym.blocks[at], (api_sym.n_blocks - at) * sizeof(*api_sym.blocks));
	api_sym.blocks[at] = (struct api_sym_block){o, bytes};
	api_sym.n_blocks++;
	*off = o;
out:
	free(all);
	return rc;
}

int gice_sym_free(uint64_t off)
{
	for (uint32_t i = 0; api_sym.on && i < api_sym.n_blocks; i++)
		if (api_sym.blocks[i].off == off) {
			memmove(&api_sym.blocks[i], &api_sym.blocks[i + 1],
				(api_sym.n_blocks - i - 1) * sizeof(*api_sym.blocks));
			api_sym.n_blocks--;
			return GICE_OK;
		}
	gice_error("api", "gice_sym_free: offset %llu is not a symmetric allocation", (unsigned long long)off);
	return GICE_ERR_INVALID;
}

/* ---------------------------------------------------------------- symmetric counters */

/* The highest id <= below free on every device here (0: none). */
static uint32_t ctr_free_below(uint32_t below)
{
	for (uint32_t i = 0; i < api_sym.n_local; i++)
		if (!api_sym.local[i].closed)
			below = GICE_MIN(below, tm_region_layout(api_sym.local[i].dev->tm)->n_counters - 1);
	for (uint32_t id = below; id > 0; id--) {
		uint32_t i;
		for (i = 0; i < api_sym.n_local; i++) {
			if (api_sym.local[i].closed)
				continue;
			tm_region_t *tm = api_sym.local[i].dev->tm;
			if (id < api_sym.local[i].dev->n_cts || id >= tm_region_layout(tm)->n_counters ||
			    tm_counter_allocated(tm, id))
				break;
		}
		if (i == api_sym.n_local)
			return id;
	}
	return 0;
}

/* Counters come from the top of the id space (gice_counter_alloc takes the lowest): every rank
 * proposes the highest id free on all its devices at or below the bound, the bound becomes the
 * smallest proposal, until all agree. */
int gice_sym_counter_alloc(gice_counter_t *ctr)
{
	uint32_t ranks = gice_world_size(), bound = UINT32_MAX - 1, *all;
	int rc = GICE_OK;

	if (!api_sym.on)
		return GICE_ERR_INVALID;
	if (!(all = calloc(ranks, sizeof(*all))))
		return GICE_ERR_NO_MEMORY;
	for (;;) {
		uint32_t mine = ctr_free_below(bound), lo = mine, agree = 1;
		if ((rc = api_sym_exchange(&mine, sizeof(mine), all)))
			break;
		for (uint32_t r = 0; r < ranks; r++) {
			agree &= all[r] == mine;
			lo = GICE_MIN(lo, all[r]);
		}
		if (!lo) {
			gice_error("api", "gice_sym_counter_alloc: no counter id is free on every device (GICE_COUNTERS)");
			rc = GICE_ERR_NO_MEMORY;
			break;
		}
		if (!agree) {
			bound = lo;
			continue;
		}
		for (uint32_t i = 0; i < api_sym.n_local && !rc; i++) {
			if (api_sym.local[i].closed)
				continue;
			rc = tm_counter_alloc_at(api_sym.local[i].dev->tm, lo);
			if (!rc)
				tm_counter_reset(api_sym.local[i].dev->tm, lo);
			else
				while (i--)
					if (!api_sym.local[i].closed)
						tm_counter_free(api_sym.local[i].dev->tm, lo);
		}
		/* every rank has reset its copies before any returns: a peer that went on at once
		 * could otherwise signal (or write directly, on the NVLink plane) a counter here that
		 * the reset then wipes (a team barrier lost its first round this way) */
		uint32_t ok = rc ? 0 : 1;
		int xrc = api_sym_exchange(&ok, sizeof(ok), all);
		for (uint32_t r = 0; !xrc && r < ranks; r++)
			if (!all[r] && !rc) {
				gice_error("api", "gice_sym_counter_alloc: rank %u could not take counter %u", r, lo);
				rc = GICE_ERR_BUSY;
			}
		if (xrc && !rc)
			rc = xrc;
		if (rc && ok)
			for (uint32_t i = 0; i < api_sym.n_local; i++)
				if (!api_sym.local[i].closed)
					tm_counter_free(api_sym.local[i].dev->tm, lo);
		if (!rc)
			*ctr = lo;
		break;
	}
	free(all);
	return rc;
}

int gice_sym_counter_free(gice_counter_t c)
{
	int rc = api_sym.on ? GICE_OK : GICE_ERR_INVALID;

	for (uint32_t i = 0; i < api_sym.n_local && !rc; i++)
		if (!api_sym.local[i].closed)
			rc = tm_counter_free(api_sym.local[i].dev->tm, c);
	return rc;
}

void api_sym_device_closed(gice_device_t *d)
{
	struct api_sym_dev *s = api_sym_dev(d);

	if (!api_sym.on || !s)
		return;
	gice_warn("api", "device %u closed before gice_sym_fini: symmetric operations to it fail from now on", d->gid);
	free(s->conn);
	s->conn = NULL;
	s->closed = 1;
	api_sym.key_of[d->gid] = 0;
	api_sym.ptr_of[d->gid] = NULL;
}

/* ---------------------------------------------------------------- device side */

/* Route a symmetric operation of k to (team, pe): its connection and the peer heap's key into
 * op; check [off, off + bytes) against the heap. */
static int sym_route(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, uint64_t off, uint64_t bytes,
		     gice_op_t *op, const char *who)
{
	struct api_sym_dev *s = api_sym_dev(k->dev);

	if (!s || !t) {
		gice_error("api", "%s on device %u: %s", who, k->dev->gid,
			   !s ? "no symmetric heap (gice_sym_init)" : "no team");
		return api_op_fail_now(k->dev, op->completion, GICE_ERR_INVALID);
	}
	if (pe >= t->n) {
		gice_error("api", "%s on device %u: team rank %u out of range (team of %u)", who, k->dev->gid, pe, t->n);
		return api_op_fail_now(k->dev, op->completion, GICE_ERR_INVALID);
	}
	if (off > api_sym.heap_bytes || bytes > api_sym.heap_bytes - off) {
		gice_error("api", "%s on device %u: offset %llu + %llu bytes outside the %llu-byte symmetric heap", who,
			   k->dev->gid, (unsigned long long)off, (unsigned long long)bytes,
			   (unsigned long long)api_sym.heap_bytes);
		return api_op_fail_now(k->dev, op->completion, GICE_ERR_OUT_OF_BOUNDS);
	}
	uint32_t g = t->gids[pe];
	op->conn = s->conn[g];
	op->rkey = api_sym.key_of[g];
	op->roff = off;
	return GICE_OK;
}

int gice_sym_put(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, uint64_t dst_off, const void *src, size_t bytes,
		 gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .local = (void *)src, .bytes = bytes, .signal = GICE_NO_COUNTER,
			.completion = completion};
	int rc = sym_route(k, t, pe, dst_off, bytes, &op, "gice_sym_put");

	return rc ? rc : gice_issue(k, &op);
}

int gice_sym_put_signal(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, uint64_t dst_off, const void *src,
			size_t bytes, gice_counter_t sig, uint64_t value, int signal_flags, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .local = (void *)src, .bytes = bytes, .value = value, .signal = sig,
			.signal_flags = signal_flags, .completion = completion};
	int rc = sym_route(k, t, pe, dst_off, bytes, &op, "gice_sym_put_signal");

	return rc ? rc : gice_issue(k, &op);
}

int gice_sym_get(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, void *dst, uint64_t src_off, size_t bytes,
		 gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_GET, .local = dst, .bytes = bytes, .signal = GICE_NO_COUNTER,
			.completion = completion};
	int rc = sym_route(k, t, pe, src_off, bytes, &op, "gice_sym_get");

	return rc ? rc : gice_issue(k, &op);
}

/* A signal is a put of no bytes at offset 0 of the peer's heap: it carries the signal, and the
 * target checks the heap's key as for any put. */
int gice_sym_signal(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, gice_counter_t sig, uint64_t value,
		    int signal_flags, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .value = value, .signal = sig, .signal_flags = signal_flags,
			.completion = completion};
	int rc = sig == GICE_NO_COUNTER ? api_op_fail_now(k->dev, completion, GICE_ERR_INVALID)
					: sym_route(k, t, pe, 0, 0, &op, "gice_sym_signal");

	return rc ? rc : gice_issue(k, &op);
}

int gice_sym_fence(gice_kctx_t *k, const gice_team_t *t, uint32_t pe)
{
	gice_op_t op = {.completion = GICE_NO_COUNTER};
	int rc = sym_route(k, t, pe, 0, 0, &op, "gice_sym_fence");

	return rc ? rc : gice_fence(k, op.conn);
}

void *gice_sym_peer_ptr(gice_kctx_t *k, const gice_team_t *t, uint32_t pe, uint64_t off, size_t len)
{
	if (!api_sym_dev(k->dev) || !t || pe >= t->n || off > api_sym.heap_bytes || len > api_sym.heap_bytes - off)
		return NULL;
	uint8_t *base = api_sym.ptr_of[t->gids[pe]];
	return base ? base + off : NULL;
}
