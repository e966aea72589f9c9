/* coll_ring.c: the pipelined ring allreduce (reduce-scatter, then allgather), run by one block
 * per device with no host step anywhere:
 *
 *  - The buffer is cut into n segments (segment s: elements [count s / n, count (s+1) / n)), each
 *    into rounds of P elements (what one bank of the scratch holds for the n - 1 steps), each
 *    round into chunks of GICE_CHUNK_BYTES.
 *  - Reduce-scatter, step 0: every chunk of segment `me` goes to the right neighbour's bank with a
 *    strong signal-add on its COLL_C_RS counter (strong: the counter reaching q means chunks 1..q
 *    have all landed). Step s: the arrival of a chunk (the counter reaching its number) wakes the
 *    block, which reduces it with its own data straight into recv and at once puts the result to
 *    the right — a chunk's arrival triggers its reduction, the reduction's completion its send.
 *    The last step's result is final: it goes straight into the right's recv, with a signal on
 *    COLL_C_AG (allgather step 0).
 *  - Allgather: each arrival on COLL_C_AG is forwarded to the right (n - 2 times).
 *  - Flow control: round G (numbered over every call, the same on every device) fills bank
 *    G mod 2 of the right; before it, the right must have reduced round G - 2: it signals its left
 *    COLL_C_CREDIT after each round.
 *  - On this host's NVLink plane (the right's heap mapped here) a send is a store and a direct add
 *    to the right's counter, and a partial sum is reduced straight into the right's bank (one
 *    pass, no copy); otherwise it is a put through the CT.
 *  - The sources of puts still in flight are never overwritten early: a segment's allgather data
 *    reaches a device only after its own reduce-scatter put of that segment landed at the right.
 *    Before returning, the device waits for its puts' completions (send and recv are free then). */
#include "api/coll.h"

#include <stdatomic.h>
#include <string.h>

struct ring {
	gice_kctx_t *k;
	const struct coll_call *c;
	struct api_coll *st;
	struct coll_local *l;
	uint32_t n, me, right, left;
	size_t esz, ce, P, M;  /* element size, elements per chunk, per round piece, longest segment */
	uint8_t *send, *recv;
	uint8_t *rheap;        /* the right's heap on this host's NVLink plane, or NULL */
	int left_plane;        /* the left is on the plane */
};

/* Chunk j of round r of segment seg: elements [*lo, *lo + *len) of the buffers (len may be 0). */
static void ring_chunk(const struct ring *g, uint32_t seg, size_t r, size_t j, size_t *lo, size_t *len)
{
	size_t count = g->c->count, s_lo = (size_t)((unsigned __int128)count * seg / g->n);
	size_t s_hi = (size_t)((unsigned __int128)count * (seg + 1) / g->n), rel = r * g->P + j * g->ce;
	size_t end = rel + g->ce;

	if (end > (r + 1) * g->P)
		end = (r + 1) * g->P;
	if (end > s_hi - s_lo)
		end = s_hi - s_lo;
	*lo = s_lo + rel;
	*len = end > rel ? end - rel : 0;
}

/* NVLink plane: the stores to the right's heap made so far are visible before its counter ctr
 * gains one. */
static int ring_announce(struct ring *g, gice_counter_t ctr)
{
	atomic_thread_fence(memory_order_release);
	return gice_peer_trigger_add(g->k, g->c->team->gids[g->right], ctr, 1);
}

/* Put len elements at src to the right's heap offset dst_off, adding 1 to its counter ctr once
 * they (and every earlier put to it) have landed. */
static int ring_send(struct ring *g, uint64_t dst_off, const uint8_t *src, size_t len, gice_counter_t ctr)
{
	if (g->rheap) { /* NVLink plane: a store, then the arrival as a direct add to its counter */
		memcpy(g->rheap + dst_off, src, len * g->esz);
		return ring_announce(g, ctr);
	}
	g->l->done++;
	if (!len) /* an empty chunk (a segment shorter than the longest) still counts */
		return gice_sym_signal(g->k, g->c->team, g->right, ctr, 1, GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG,
				       g->st->c[COLL_C_DONE]);
	return gice_sym_put_signal(g->k, g->c->team, g->right, dst_off, src, len * g->esz, ctr, 1,
				   GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, g->st->c[COLL_C_DONE]);
}

static int ring_round(struct ring *g, size_t r)
{
	struct coll_local *l = g->l;
	const struct coll_call *c = g->c;
	size_t piece = g->M - r * g->P < g->P ? g->M - r * g->P : g->P, K = (piece + g->ce - 1) / g->ce, lo, len;
	uint64_t bank = g->st->ring_off + (l->rounds & 1) * g->st->ring_bank;
	const uint8_t *slots = gice_sym_ptr(g->k->dev, bank);
	int rc;

	/* the right has reduced round G - 2, which used the bank this round fills */
	if (l->rounds >= 2 &&
	    (rc = gice_wait_until(g->k, g->st->c[COLL_C_CREDIT], GICE_CMP_GE, l->rounds - 1, 0, NULL)))
		return rc;
	/* reduce-scatter step 0: this device's own segment */
	for (size_t j = 0; j < K; j++) {
		ring_chunk(g, g->me, r, j, &lo, &len);
		if ((rc = ring_send(g, bank + j * g->ce * g->esz, g->send + lo * g->esz, len, g->st->c[COLL_C_RS])))
			return rc;
	}
	/* steps 0 .. n - 2 arrive here: reduce each chunk as it lands and pass it on */
	for (uint32_t s = 0; s + 1 < g->n; s++) {
		uint32_t seg = (g->me + 2 * g->n - s - 1) % g->n;
		int last = s + 2 == g->n;
		for (size_t j = 0; j < K; j++) {
			if ((rc = gice_wait_until(g->k, g->st->c[COLL_C_RS], GICE_CMP_GE, ++l->rs, 0, NULL)))
				return rc;
			ring_chunk(g, seg, r, j, &lo, &len);
			const uint8_t *in = slots + (s * g->P + j * g->ce) * g->esz;
			uint64_t next = bank + ((s + 1) * g->P + j * g->ce) * g->esz;
			if (!last && g->rheap) { /* NVLink plane: reduce straight into the right's bank */
				coll_reduce(g->rheap + next, g->send + lo * g->esz, in, len, c->type, c->op);
				if ((rc = ring_announce(g, g->st->c[COLL_C_RS])))
					return rc;
				continue;
			}
			uint8_t *dst = g->recv + lo * g->esz;
			coll_reduce(dst, g->send + lo * g->esz, in, len, c->type, c->op);
			if (last && c->op == GICE_RED_AVG)
				coll_scale(dst, len, c->type, g->n);
			rc = last ? ring_send(g, c->recv + lo * g->esz, dst, len, g->st->c[COLL_C_AG])
				  : ring_send(g, next, dst, len, g->st->c[COLL_C_RS]);
			if (rc)
				return rc;
		}
	}
	/* this bank is read: the left may fill it again (round G + 2) */
	rc = g->left_plane ? gice_peer_trigger_add(g->k, c->team->gids[g->left], g->st->c[COLL_C_CREDIT], 1)
			   : gice_sym_signal(g->k, c->team, g->left, g->st->c[COLL_C_CREDIT], 1, GICE_SIGNAL_ADD,
					     GICE_NO_COUNTER);
	if (rc)
		return rc;
	l->rounds++;
	/* allgather: segment me - t arrives at step t; forward all but the last step's */
	for (uint32_t t = 0; t + 1 < g->n; t++) {
		uint32_t seg = (g->me + g->n - t) % g->n;
		for (size_t j = 0; j < K; j++) {
			if ((rc = gice_wait_until(g->k, g->st->c[COLL_C_AG], GICE_CMP_GE, ++l->ag, 0, NULL)))
				return rc;
			if (t + 2 == g->n)
				continue;
			ring_chunk(g, seg, r, j, &lo, &len);
			if ((rc = ring_send(g, c->recv + lo * g->esz, g->recv + lo * g->esz, len, g->st->c[COLL_C_AG])))
				return rc;
		}
	}
	return GICE_OK;
}

int coll_allreduce_ring(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
			uint32_t me)
{
	struct ring g = {.k = k, .c = c, .st = st, .l = l, .n = c->team->n, .me = me};
	int rc = GICE_OK;

	g.right = (me + 1) % g.n;
	g.left = (me + g.n - 1) % g.n;
	g.esz = gice_dtype_size(c->type);
	g.ce = st->chunk_bytes / g.esz ? st->chunk_bytes / g.esz : 1;
	g.M = (c->count + g.n - 1) / g.n;
	g.P = st->ring_bank / ((g.n - 1) * g.esz); /* a round's piece: n - 1 steps of it fill a bank */
	if (g.P >= g.ce)
		g.P = g.P / g.ce * g.ce;
	else
		g.ce = g.P;
	if (!g.P) {
		gice_error("api", "gice_coll_allreduce: a ring of %u does not fit %llu bytes of scratch "
			   "(GICE_COLL_SCRATCH_BYTES)", g.n, (unsigned long long)st->ring_bank);
		return GICE_ERR_NO_MEMORY;
	}
	g.rheap = gice_sym_peer_ptr(k, c->team, g.right, 0, gice_sym_heap_bytes());
	g.left_plane = gice_sym_peer_ptr(k, c->team, g.left, 0, gice_sym_heap_bytes()) != NULL;
	g.send = gice_sym_ptr(k->dev, c->send);
	g.recv = gice_sym_ptr(k->dev, c->recv);
	for (size_t r = 0; r * g.P < g.M && !rc; r++)
		rc = ring_round(&g, r);
	if (!rc)
		rc = gice_wait_until(k, st->c[COLL_C_DONE], GICE_CMP_GE, l->done, 0, NULL);
	return rc;
}
