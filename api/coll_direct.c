/* coll_direct.c: broadcast, as a pipelined chain from the root around the ring (each chunk
 * forwarded as soon as it lands: its arrival counter wakes the block that sends it on), and
 * alltoall(v), every block put straight into its device's recv. All start with a team sync
 * (coll_api.c): no device writes a recv another may still be reading for the call before. On
 * this host's NVLink plane a send is a store and a direct add to the peer's counter; otherwise a
 * put with a strong signal through the CT. */
#include "api/coll.h"

#include <string.h>

/* Send bytes at src to team rank pe's heap offset dst_off and add 1 to its counter ctr once
 * they have landed; l->done counts the puts through the CT. */
static int direct_send_on(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
			  uint32_t pe, uint64_t dst_off, const uint8_t *src, size_t bytes, gice_counter_t ctr)
{
	uint8_t *q = gice_sym_peer_ptr(k, c->team, pe, dst_off, bytes);

	if (q) {
		memcpy(q, src, bytes); /* released by the add (a seq_cst read-modify-write) */
		return gice_peer_trigger_add(k, c->team->gids[pe], ctr, 1);
	}
	l->done++;
	if (!bytes)
		return gice_sym_signal(k, c->team, pe, ctr, 1, GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, st->c[COLL_C_DONE]);
	return gice_sym_put_signal(k, c->team, pe, dst_off, src, bytes, ctr, 1, GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG,
				   st->c[COLL_C_DONE]);
}

static int direct_send(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
		       uint32_t pe, uint64_t dst_off, const uint8_t *src, size_t bytes)
{
	return direct_send_on(k, c, st, l, pe, dst_off, src, bytes, st->c[COLL_C_AG]);
}

static int direct_end(gice_kctx_t *k, struct api_coll *st, struct coll_local *l)
{
	return coll_wait(k, st->c[COLL_C_DONE], l->done);
}

int coll_broadcast(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	uint32_t n = c->team->n, right = (me + 1) % n;
	size_t esz = gice_dtype_size(c->type), bytes = c->count * esz;
	size_t cb = st->chunk_bytes < esz ? esz : st->chunk_bytes / esz * esz, K = (bytes + cb - 1) / cb;
	uint8_t *recv = gice_sym_ptr(k->dev, c->recv);
	int rc = GICE_OK;

	if (me == c->root && c->send != c->recv)
		memmove(recv, gice_sym_ptr(k->dev, c->send), bytes);
	for (size_t j = 0; j < K && !rc; j++) {
		size_t off = j * cb, len = bytes - off < cb ? bytes - off : cb;
		if (me != c->root)
			rc = coll_wait(k, st->c[COLL_C_AG], ++l->ag);
		if (!rc && right != c->root)
			rc = direct_send(k, c, st, l, right, c->recv + off, recv + off, len);
	}
	return rc ? rc : direct_end(k, st, l);
}

int coll_alltoall(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	uint32_t n = c->team->n;
	size_t bytes = c->count * gice_dtype_size(c->type);
	const uint8_t *send = gice_sym_ptr(k->dev, c->send);
	uint8_t *recv = gice_sym_ptr(k->dev, c->recv);
	int rc = GICE_OK;

	memcpy(recv + me * bytes, send + me * bytes, bytes);
	for (uint32_t i = 1; i < n && !rc; i++) {
		uint32_t pe = (me + i) % n;
		rc = direct_send(k, c, st, l, pe, c->recv + me * bytes, send + pe * bytes, bytes);
	}
	if (rc)
		return rc;
	l->ag += n - 1;
	if ((rc = coll_wait(k, st->c[COLL_C_AG], l->ag)))
		return rc;
	return direct_end(k, st, l);
}

/* alltoallv: first every device tells each other device r where r's elements land in its recv
 * (its rdsp[r], through the scratch: a put's source must be device memory), then every block
 * goes straight to its place. A destination past the heap fails the put (GICE_ERR_OUT_OF_BOUNDS,
 * the peer's displacement is not trusted further). */
int coll_alltoallv(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	uint32_t n = c->team->n;
	size_t esz = gice_dtype_size(c->type);
	uint64_t *out = gice_sym_ptr(k->dev, st->xchg_off), *in = out + n;
	const uint8_t *send = gice_sym_ptr(k->dev, c->send);
	uint8_t *recv = gice_sym_ptr(k->dev, c->recv);
	int rc = GICE_OK;

	for (uint32_t r = 0; r < n; r++)
		out[r] = c->rdsp[r];
	for (uint32_t i = 1; i < n && !rc; i++) {
		uint32_t pe = (me + i) % n;
		rc = direct_send_on(k, c, st, l, pe, st->xchg_off + (n + me) * 8ull, (const uint8_t *)&out[pe], 8,
				    st->c[COLL_C_XCHG]);
	}
	l->xchg += n - 1;
	if (rc || (rc = coll_wait(k, st->c[COLL_C_XCHG], l->xchg)))
		return rc;
	memmove(recv + c->rdsp[me] * esz, send + c->sdsp[me] * esz, c->scnt[me] * esz);
	for (uint32_t i = 1; i < n && !rc; i++) {
		uint32_t pe = (me + i) % n;
		if (in[pe] > api_sym.heap_bytes / esz) {
			gice_error("api", "gice_coll_alltoallv: team rank %u names displacement %llu: past the heap", pe,
				   (unsigned long long)in[pe]);
			return GICE_ERR_OUT_OF_BOUNDS;
		}
		rc = direct_send(k, c, st, l, pe, c->recv + in[pe] * esz, send + c->sdsp[pe] * esz, c->scnt[pe] * esz);
	}
	if (rc)
		return rc;
	l->ag += n - 1;
	if ((rc = coll_wait(k, st->c[COLL_C_AG], l->ag)))
		return rc;
	return direct_end(k, st, l);
}
