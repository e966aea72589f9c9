/* api_team.c: teams (the world, split by color and key, strided), rank translation, and the
 * team barrier kernels call: a dissemination barrier made of signals and counter waits only. */
#include "api/api_sym.h"
#include "api/coll.h"

#include <stdlib.h>
#include <string.h>

#include "emu/common/tsan.h"

/* ---------------------------------------------------------------- set-up */

void api_team_free(gice_team_t *t)
{
	if (!t)
		return;
	for (gice_team_t **l = &api_sym.teams; *l; l = &(*l)->next)
		if (*l == t) {
			*l = t->next;
			break;
		}
	for (uint32_t r = 0; r < t->rounds; r++)
		gice_sym_counter_free(t->bar[r]);
	api_coll_free(t);
	free(t->gids);
	free(t);
}

int api_team_make(const uint32_t *gids, uint32_t n, gice_team_t **out)
{
	gice_team_t *t = calloc(1, sizeof(*t));
	int rc = GICE_OK;

	if (!t || !(t->gids = malloc(n * sizeof(uint32_t)))) {
		free(t);
		return GICE_ERR_NO_MEMORY;
	}
	memcpy(t->gids, gids, n * sizeof(uint32_t));
	t->n = n;
	while ((1u << t->rounds) < n)
		t->rounds++;
	/* every rank allocates the counters, member or not: symmetric ids stay in step */
	for (uint32_t r = 0; r < t->rounds && !rc; r++)
		if ((rc = gice_sym_counter_alloc(&t->bar[r])))
			t->rounds = r;
	for (uint32_t i = 0; i < n && !rc; i++)
		for (uint32_t j = 0; j < api_sym.n_local; j++)
			if (!api_sym.local[j].closed && api_sym.local[j].dev->gid == gids[i]) {
				t->local[t->n_local].dev = api_sym.local[j].dev;
				t->local[t->n_local++].rank = i;
			}
	if (rc || !t->n_local) { /* a rank with no member holds no handle */
		api_team_free(t);
		t = NULL;
	}
	if (!rc)
		*out = t;
	if (t) {
		t->next = api_sym.teams;
		api_sym.teams = t;
	}
	return rc;
}

gice_team_t *gice_team_world(void) { return api_sym.on ? api_sym.world : NULL; }
uint32_t gice_team_size(const gice_team_t *t) { return t ? t->n : 0; }
int32_t gice_team_rank(const gice_team_t *t, const gice_device_t *d) { return api_team_local_rank(t, d, NULL); }
uint32_t gice_team_n_local(const gice_team_t *t) { return t ? t->n_local : 0; }
gice_device_t *gice_team_local(const gice_team_t *t, uint32_t i) { return t && i < t->n_local ? t->local[i].dev : NULL; }

uint32_t gice_team_device_id(const gice_team_t *t, uint32_t rank)
{
	return t && rank < t->n ? t->gids[rank] : UINT32_MAX;
}

int32_t gice_team_translate_rank(const gice_team_t *src, uint32_t rank, const gice_team_t *dst)
{
	uint32_t g = gice_team_device_id(src, rank);

	for (uint32_t i = 0; dst && g != UINT32_MAX && i < dst->n; i++)
		if (dst->gids[i] == g)
			return (int32_t)i;
	return -1;
}

int gice_team_split_strided(gice_team_t *parent, uint32_t start, uint32_t stride, uint32_t size, gice_team_t **out)
{
	uint32_t *gids;
	int rc;

	if (!api_sym.on || !stride || !size || !out) {
		gice_error("api", "gice_team_split_strided(start %u, stride %u, size %u): %s", start, stride, size,
			   !api_sym.on ? "no gice_sym_init" : "stride and size must be > 0, out not NULL");
		return GICE_ERR_INVALID;
	}
	uint64_t last = start + (uint64_t)stride * (size - 1);
	if (parent && last >= parent->n) {
		gice_error("api", "gice_team_split_strided(start %u, stride %u, size %u): rank %llu is past the parent's "
				  "%u ranks", start, stride, size, (unsigned long long)last, parent->n);
		return GICE_ERR_INVALID;
	}
	if (!(gids = malloc(size * sizeof(uint32_t))))
		return GICE_ERR_NO_MEMORY;
	/* a rank not in the parent (NULL) has no device in the new team either: it only takes its
	 * part in allocating the team's symmetric counters */
	for (uint32_t i = 0; i < size; i++)
		gids[i] = parent ? parent->gids[start + i * stride] : UINT32_MAX;
	rc = api_team_make(gids, size, out);
	free(gids);
	return rc;
}

/* What a rank says of each of its devices at a split. */
struct split_entry {
	uint32_t gid, parent_rank;
	int32_t color, key;
};

static int cmp_split(const void *a, const void *b)
{
	const struct split_entry *x = a, *y = b;

	if (x->color != y->color)
		return x->color < y->color ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->parent_rank < y->parent_rank ? -1 : x->parent_rank > y->parent_rank;
}

int gice_team_split(gice_team_t *parent, const int *colors, const int *keys, gice_team_t **out)
{
	struct split_entry mine[API_SYM_MAX_LOCAL], *all = NULL;
	uint32_t ranks = gice_world_size(), n = 0, *gids = NULL;
	int rc;

	if (!api_sym.on || (parent && parent->n_local && (!colors || !keys || !out))) {
		gice_error("api", "gice_team_split: %s", !api_sym.on ? "no gice_sym_init" : "colors, keys or out is NULL");
		return GICE_ERR_INVALID;
	}
	for (uint32_t i = 0; i < API_SYM_MAX_LOCAL; i++)
		mine[i] = (struct split_entry){UINT32_MAX, 0, GICE_TEAM_NO_COLOR, 0};
	for (uint32_t i = 0; parent && i < parent->n_local; i++)
		mine[i] = (struct split_entry){parent->local[i].dev->gid, parent->local[i].rank, colors[i], keys[i]};
	all = calloc((size_t)ranks * API_SYM_MAX_LOCAL, sizeof(*all));
	gids = calloc((size_t)ranks * API_SYM_MAX_LOCAL, sizeof(uint32_t));
	if (!all || !gids) {
		rc = GICE_ERR_NO_MEMORY;
		goto out;
	}
	if ((rc = api_sym_exchange(mine, sizeof(mine), all)))
		goto out;
	/* every device with a color, sorted by (color, key, parent rank): each color's run is a team */
	for (uint32_t i = 0; i < ranks * API_SYM_MAX_LOCAL; i++)
		if (all[i].gid != UINT32_MAX && all[i].color != GICE_TEAM_NO_COLOR)
			all[n++] = all[i];
	qsort(all, n, sizeof(*all), cmp_split);
	for (uint32_t i = 0; parent && i < parent->n_local; i++)
		out[i] = NULL;
	for (uint32_t a = 0, b; a < n && !rc; a = b) {
		gice_team_t *t = NULL;
		for (b = a; b < n && all[b].color == all[a].color; b++)
			gids[b - a] = all[b].gid;
		/* collective: every rank makes every color's team (members keep a handle) */
		if ((rc = api_team_make(gids, b - a, &t)))
			break;
		for (uint32_t i = 0; t && parent && i < parent->n_local; i++)
			if (colors[i] == all[a].color)
				out[i] = t;
	}
out:
	free(all);
	free(gids);
	return rc;
}

int gice_team_destroy(gice_team_t *t)
{
	if (!t || t == api_sym.world)
		return GICE_ERR_INVALID;
	api_team_free(t);
	return GICE_OK;
}

/* ---------------------------------------------------------------- device side */

static int team_sync(gice_kctx_t *k, const gice_team_t *t, const char *who)
{
	uint32_t li = 0;
	int32_t me = api_team_local_rank(t, k->dev, &li);
	int rc = GICE_OK;

	if (me < 0) {
		gice_error("api", "%s: device %u is not a member of the team", who, k->dev->gid);
		api_kernel_failed(k, GICE_ERR_INVALID, "%s: device %u not in the team", who, k->dev->gid);
		return GICE_ERR_INVALID;
	}
	/* this device's barrier number: one block per device calls it */
	uint64_t epoch = atomic_fetch_add_explicit(&((gice_team_t *)t)->local[li].epoch, 1, memory_order_relaxed) + 1;
	for (uint32_t r = 0; r < t->rounds && !rc; r++) {
		uint32_t to = (uint32_t)(((uint64_t)me + (1ull << r)) % t->n), g = t->gids[to];
		/* a device on this host's NVLink plane: add to its counter in its trigger memory (the
		 * barrier orders no data of its own: gice_team_barrier quieted first); else a signal */
		tm_region_t *tm = g < api_g.max_gids ? atomic_load_explicit(&api_g.peer_tm[g], memory_order_acquire) : NULL;
		if (tm) {
			GICE_TSAN_OUT(); /* tsan.h */
			tm_counter_add(tm, t->bar[r], 1);
		} else {
			rc = gice_sym_signal(k, t, to, t->bar[r], 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER);
		}
		if (!rc) /* from rank me - 2^r: its epoch-th arrival at round r */
			rc = gice_wait_until(k, t->bar[r], GICE_CMP_GE, epoch, 0, NULL);
	}
	return rc;
}

int gice_team_sync(gice_kctx_t *k, const gice_team_t *t) { return team_sync(k, t, "gice_team_sync"); }

int gice_team_barrier(gice_kctx_t *k, const gice_team_t *t)
{
	int rc = gice_quiet(k);

	return rc ? rc : team_sync(k, t, "gice_team_barrier");
}
