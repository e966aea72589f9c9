/* coll_ring.c: the pipelined ring — allreduce (reduce-scatter, then allgather), reduce_scatter,
 * allgather and reduce — run by one block per device with no host step anywhere:
 *
 *  - The buffer is cut into n segments (allreduce, reduce: segment s is elements
 *    [count s / n, count (s+1) / n); reduce_scatter, allgather: count elements each), each into
 *    rounds of P elements (what one bank of the scratch holds for the n - 1 steps), each round
 *    into chunks of GICE_CHUNK_BYTES. The ring runs in GICE_TOPO order (by default the ranks of
 *    one host next to each other); ring segment x is the segment of the device at ring position
 *    x - 1, so that every device ends the reduce-scatter holding its own segment.
 *  - Reduce-scatter, step 0: every chunk of position `me` goes to the right neighbour's bank with
 *    a strong signal-add on its COLL_C_RS counter (strong: the counter reaching q means chunks
 *    1..q have all landed). Step s: the arrival of a chunk (the counter reaching its number)
 *    wakes the block, which reduces it with its own data and at once sends the result to the
 *    right — a chunk's arrival triggers its reduction, the reduction's completion its send. The
 *    last step's result is final: allreduce writes it to recv and sends it straight into the
 *    right's recv with a signal on COLL_C_AG (allgather step 0); reduce_scatter keeps it; reduce
 *    sends it to the root.
 *  - Allgather: each arrival on COLL_C_AG is forwarded to the right (n - 2 times).
 *  - Flow control: round G (numbered over every call, the same on every device) fills bank
 *    G mod 2 of the right; before it, the right must have reduced round G - 2: it signals its left
 *    COLL_C_CREDIT after each round (after its own puts out of that bank completed).
 *  - On this host's NVLink plane (the peer's heap mapped here) a send is a store and a direct add
 *    to the peer's counter, and a partial sum is reduced straight into the right's bank (one
 *    pass, no copy); otherwise the partial is reduced into the landing slot itself and put from
 *    there through the CT.
 *  - The sources of puts still in flight are never overwritten early: in an allreduce a segment's
 *    allgather data reaches a device only after its own reduce-scatter put of that segment landed
 *    at the right; allgather alone starts with a team sync (coll_api.c). Before returning, the device waits for
 *    its puts' completions (send and recv are free then). */
#include "api/coll.h"

#include <string.h>

struct ring {
	gice_kctx_t *k;
	const struct coll_call *c;
	struct api_coll *st;
	struct coll_local *l;
	uint32_t n, me, rank;  /* team size, this device's ring position and team rank */
	uint32_t right, left;  /* team ranks of the neighbours in ring order (GICE_TOPO) */
	size_t esz, ce, P, M;  /* element size, elements per chunk, per round piece, longest segment */
	size_t total;          /* elements of the segmented buffer */
	uint8_t *send, *recv;
	uint8_t *rheap;        /* the right's heap on this host's NVLink plane, or NULL */
	int left_plane;        /* the left is on the plane */
};

/* GICE_STATS, GICE_TRACE: a chunk's stages (api_ev.h CHUNK_*), when the device keeps a ring. */
struct chunk_t {
	uint64_t t[3]; /* arrived (its counter's last change), woke, reduced */
};

/* The block woke for the chunk that signals ctr: its arrival and now. */
static void chunk_woke(const struct ring *g, gice_counter_t ctr, struct chunk_t *ch)
{
	tm_counter_state_t cs;

	if (!g->k->dev->evs)
		return;
	tm_counter_get(g->k->dev->tm, ctr, &cs); /* before the clock: the write came first */
	ch->t[1] = ch->t[2] = gice_now_ns();
	/* the write's stamp is the writer thread's clock, which may read up to tens of ns ahead
	 * of this one (emu/common/clock.c): the arrival is never after the wake-up */
	ch->t[0] = GICE_MIN(cs.ts_ns, ch->t[1]);
}

static void chunk_reduced(const struct ring *g, struct chunk_t *ch)
{
	if (g->k->dev->evs)
		ch->t[2] = gice_now_ns();
}

/* The chunk (step s, number j) is sent on: its record, with ctr its signal counter. */
static void chunk_sent(const struct ring *g, uint32_t kind, gice_counter_t ctr, uint32_t s, size_t j,
		       const struct chunk_t *ch)
{
	api_ev_t *e = api_ev_take(g->k->dev);

	if (e)
		*e = (api_ev_t){.kind = kind, .counter = ctr, .a = s, .b = (uint32_t)j,
				.t = {ch->t[0], ch->t[1], ch->t[2], gice_now_ns()}};
}

static size_t seg_lo(const struct ring *g, uint32_t seg)
{
	return (size_t)((unsigned __int128)g->total * seg / g->n);
}

/* Chunk j of round r of ring segment x (the segment of the device at ring position x - 1):
 * elements [*lo, *lo + *len) of the segmented buffer (len may be 0). */
static void ring_chunk(const struct ring *g, uint32_t x, size_t r, size_t j, size_t *lo, size_t *len)
{
	uint32_t seg = g->st->ring[(x + g->n - 1) % g->n];
	size_t s_lo = seg_lo(g, seg), s_len = seg_lo(g, seg + 1) - s_lo, rel = r * g->P + j * g->ce;
	size_t end = rel + g->ce;

	if (end > (r + 1) * g->P)
		end = (r + 1) * g->P;
	if (end > s_len)
		end = s_len;
	*lo = s_lo + rel;
	*len = end > rel ? end - rel : 0;
}

/* Add 1 to counter ctr of team rank pe, a peer on the NVLink plane, after the stores made so
 * far to its heap. */
static int plane_announce(struct ring *g, uint32_t pe, gice_counter_t ctr)
{
	/* the add is a seq_cst read-modify-write of the counter: it releases the stores before it
	 * to the waiter that reads the counter (acquire) */
	return gice_peer_trigger_add(g->k, g->c->team->gids[pe], ctr, 1);
}

/* Send len elements at src to team rank pe's heap offset dst_off, adding 1 to its counter ctr
 * once they (and, through the CT, every earlier put to it) have landed. peer_heap: pe's heap on
 * the plane, or NULL. */
static int send_to(struct ring *g, uint32_t pe, uint8_t *peer_heap, uint64_t dst_off, const uint8_t *src, size_t len,
		   gice_counter_t ctr)
{
	if (peer_heap) {
		memcpy(peer_heap + dst_off, src, len * g->esz);
		return plane_announce(g, pe, ctr);
	}
	g->l->done++;
	if (!len) /* an empty chunk (a segment shorter than the longest) still counts */
		return gice_sym_signal(g->k, g->c->team, pe, ctr, 1, GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG,
				       g->st->c[COLL_C_DONE]);
	return gice_sym_put_signal(g->k, g->c->team, pe, dst_off, src, len * g->esz, ctr, 1,
				   GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, g->st->c[COLL_C_DONE]);
}

static int ring_send(struct ring *g, uint64_t dst_off, const uint8_t *src, size_t len, gice_counter_t ctr)
{
	return send_to(g, g->right, g->rheap, dst_off, src, len, ctr);
}

static int wait_done(struct ring *g)
{
	return coll_wait(g->k, g->st->c[COLL_C_DONE], g->l->done);
}

/* The final value of chunk (lo, len), reduced from own (this device's data) and in (the landing
 * slot, at heap offset in_off): where it goes by kind. */
static int ring_final(struct ring *g, size_t lo, size_t len, const uint8_t *own, uint8_t *in, uint64_t in_off,
		      struct chunk_t *ch)
{
	const struct coll_call *c = g->c;
	uint8_t *dst;

	switch (c->kind) {
	case COLL_ALLREDUCE:
		dst = g->recv + lo * g->esz;
		break;
	case COLL_REDUCE_SCATTER:
		dst = g->recv + (lo - seg_lo(g, g->rank)) * g->esz;
		break;
	default: /* reduce: at the root into recv, elsewhere in the slot, then to the root */
		dst = g->rank == c->root ? g->recv + lo * g->esz : in;
		break;
	}
	coll_reduce(dst, own, in, len, c->type, c->op);
	if (c->op == GICE_RED_AVG)
		coll_scale(dst, len, c->type, g->n);
	chunk_reduced(g, ch);
	if (c->kind == COLL_ALLREDUCE)
		return ring_send(g, c->recv + lo * g->esz, dst, len, g->st->c[COLL_C_AG]);
	if (c->kind == COLL_REDUCE && g->rank != c->root) {
		(void)in_off;
		return send_to(g, c->root, gice_sym_peer_ptr(g->k, c->team, c->root, 0, gice_sym_heap_bytes()),
			       c->recv + lo * g->esz, dst, len, g->st->c[COLL_C_AG]);
	}
	return GICE_OK;
}

static int ring_reduce_scatter(struct ring *g, size_t r, size_t K)
{
	struct coll_local *l = g->l;
	const struct coll_call *c = g->c;
	uint64_t bank = g->st->ring_off + (l->rounds & 1) * g->st->ring_bank;
	uint8_t *slots = gice_sym_ptr(g->k->dev, bank);
	size_t lo, len;
	int rc;

	/* the right has reduced round G - 2, which used the bank this round fills */
	if (l->rounds >= 2 &&
	    (rc = coll_wait(g->k, g->st->c[COLL_C_CREDIT], l->rounds - 1)))
		return rc;
	for (size_t j = 0; j < K; j++) { /* step 0: this device's own position */
		ring_chunk(g, g->me, r, j, &lo, &len);
		if ((rc = ring_send(g, bank + j * g->ce * g->esz, g->send + lo * g->esz, len, g->st->c[COLL_C_RS])))
			return rc;
	}
	/* steps 0 .. n - 2 arrive here: reduce each chunk as it lands and pass it on */
	for (uint32_t s = 0; s + 1 < g->n; s++) {
		uint32_t x = (g->me + 2 * g->n - s - 1) % g->n;
		for (size_t j = 0; j < K; j++) {
			struct chunk_t ch = {{0}};
			if ((rc = coll_wait(g->k, g->st->c[COLL_C_RS], ++l->rs)))
				return rc;
			chunk_woke(g, g->st->c[COLL_C_RS], &ch);
			ring_chunk(g, x, r, j, &lo, &len);
			uint64_t in_off = bank + (s * g->P + j * g->ce) * g->esz;
			uint64_t next = bank + ((s + 1) * g->P + j * g->ce) * g->esz;
			uint8_t *in = slots + (in_off - bank);
			const uint8_t *own = g->send + lo * g->esz;
			if (s + 2 == g->n)
				rc = ring_final(g, lo, len, own, in, in_off, &ch);
			else if (g->rheap) { /* NVLink plane: reduce straight into the right's bank */
				coll_reduce(g->rheap + next, own, in, len, c->type, c->op);
				chunk_reduced(g, &ch);
				rc = plane_announce(g, g->right, g->st->c[COLL_C_RS]);
			} else { /* reduce in the slot, put from there */
				coll_reduce(in, own, in, len, c->type, c->op);
				chunk_reduced(g, &ch);
				rc = ring_send(g, next, in, len, g->st->c[COLL_C_RS]);
			}
			if (rc)
				return rc;
			chunk_sent(g, API_EV_CHUNK_RS, g->st->c[COLL_C_RS], s + 1, j, &ch);
		}
	}
	/* this bank is read, and no put reads it any more: the left may fill it again (G + 2) */
	if ((rc = wait_done(g)))
		return rc;
	rc = g->left_plane ? gice_peer_trigger_add(g->k, c->team->gids[g->left], g->st->c[COLL_C_CREDIT], 1)
			   : gice_sym_signal(g->k, c->team, g->left, g->st->c[COLL_C_CREDIT], 1, GICE_SIGNAL_ADD,
					     GICE_NO_COUNTER);
	l->rounds++;
	return rc;
}

/* Allgather of round r: position me + 1 (segment me) is complete in recv here (sent already by
 * an allreduce's last reduce-scatter step); each arrival is forwarded but the last step's. */
static int ring_allgather(struct ring *g, size_t r, size_t K, int send_own)
{
	const struct coll_call *c = g->c;
	size_t lo, len;
	int rc;

	for (size_t j = 0; send_own && j < K; j++) {
		ring_chunk(g, g->me + 1, r, j, &lo, &len);
		if ((rc = ring_send(g, c->recv + lo * g->esz, g->recv + lo * g->esz, len, g->st->c[COLL_C_AG])))
			return rc;
	}
	for (uint32_t t = 0; t + 1 < g->n; t++) {
		uint32_t x = (g->me + g->n - t) % g->n;
		for (size_t j = 0; j < K; j++) {
			struct chunk_t ch = {{0}};
			if ((rc = coll_wait(g->k, g->st->c[COLL_C_AG], ++g->l->ag)))
				return rc;
			if (t + 2 == g->n)
				continue;
			chunk_woke(g, g->st->c[COLL_C_AG], &ch);
			ring_chunk(g, x, r, j, &lo, &len);
			if ((rc = ring_send(g, c->recv + lo * g->esz, g->recv + lo * g->esz, len, g->st->c[COLL_C_AG])))
				return rc;
			chunk_sent(g, API_EV_CHUNK_AG, g->st->c[COLL_C_AG], t + 1, j, &ch);
		}
	}
	return GICE_OK;
}

int coll_ring(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	struct ring g = {.k = k, .c = c, .st = st, .l = l, .n = c->team->n, .me = st->ring_pos[me], .rank = me};
	int rc = GICE_OK;

	g.right = st->ring[(g.me + 1) % g.n];
	g.left = st->ring[(g.me + g.n - 1) % g.n];
	g.esz = gice_dtype_size(c->type);
	g.total = c->kind == COLL_ALLREDUCE || c->kind == COLL_REDUCE ? c->count : c->count * g.n;
	g.ce = st->chunk_bytes / g.esz ? st->chunk_bytes / g.esz : 1;
	g.M = (g.total + g.n - 1) / g.n;
	g.P = st->ring_bank / ((g.n - 1) * g.esz); /* a round's piece: n - 1 steps of it fill a bank */
	if (c->kind == COLL_ALLGATHER) /* no bank: one round */
		g.P = g.M ? (g.M + g.ce - 1) / g.ce * g.ce : 1;
	if (g.P >= g.ce)
		g.P = g.P / g.ce * g.ce;
	else
		g.ce = g.P;
	if (!g.P) {
		gice_error("api", "gice_coll: a ring of %u does not fit %llu bytes of scratch (GICE_COLL_SCRATCH_BYTES)",
			   g.n, (unsigned long long)st->ring_bank);
		return GICE_ERR_NO_MEMORY;
	}
	g.rheap = gice_sym_peer_ptr(k, c->team, g.right, 0, gice_sym_heap_bytes());
	g.left_plane = gice_sym_peer_ptr(k, c->team, g.left, 0, gice_sym_heap_bytes()) != NULL;
	g.send = gice_sym_ptr(k->dev, c->send);
	g.recv = gice_sym_ptr(k->dev, c->recv);
	if (c->kind == COLL_ALLGATHER) { /* own block into place (in place: it is there) */
		uint8_t *mine = g.recv + seg_lo(&g, me) * g.esz;
		if (mine != g.send)
			memmove(mine, g.send, c->count * g.esz);
	}
	for (size_t r = 0; r * g.P < g.M && !rc; r++) {
		size_t piece = g.M - r * g.P < g.P ? g.M - r * g.P : g.P, K = (piece + g.ce - 1) / g.ce;
		if (c->kind != COLL_ALLGATHER)
			rc = ring_reduce_scatter(&g, r, K);
		if (!rc && (c->kind == COLL_ALLREDUCE || c->kind == COLL_ALLGATHER))
			rc = ring_allgather(&g, r, K, c->kind == COLL_ALLGATHER);
		if (!rc && c->kind == COLL_REDUCE && me == c->root) { /* every other device's final chunks */
			g.l->ag += (uint64_t)(g.n - 1) * K;
			rc = coll_wait(k, st->c[COLL_C_AG], g.l->ag);
		}
	}
	if (!rc)
		rc = wait_done(&g);
	return rc;
}
