/* coll_init.c: the collectives' set-up — gice_coll_init (scratch in the symmetric heap,
 * symmetric counters, the ring's order by host or from a GICE_TOPO file), their parameters, and
 * the release of a team's state. */
#include "api/coll.h"

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

