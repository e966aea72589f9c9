/* ct_link_rndv.c: rendezvous — a large message's bytes move by one remote read (or, when the
 * peer's memory is mapped here on the NVLink plane, one memcpy) instead of being cut into
 * packets, and never before the device whose memory is addressed by key has validated the range
 * against its registration:
 *   put: the initiator announces it (PUT_RTS); the target validates key, range and signal, reads
 *        the bytes from the initiator's memory into the validated place and answers PUT_DONE;
 *   get: the requester asks (GET_RNDV); the target validates key and range as for a GET_REQ and
 *        answers GET_GO with the data's offset in its memory; only then does the requester read
 *        (or copy) the bytes into its destination, and the get completes.
 * Both directions share one table of reads (posted, or waiting for a fabric read slot). When to
 * use it: GICE_CT_RNDV_BYTES, by default measured per provider and path (ct_rndv_auto). Runs
 * under the link lock, like the rest of the link. */
#include "emu/ct_engine/ct_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- when */

/* GICE_CT_RNDV_BYTES=auto: from which size a put or get goes by rendezvous, per provider, op,
 * path and whether the devices' CTs spin when idle, measured on this project's 2-core
 * development VM (libfabric 1.17, two ranks on loopback, 16 KiB packets, bundles;
 * docs/protocol.md#when-rendezvous-is-used has the figures). Each entry is the smallest size
 * from which rendezvous was at least as fast as packets (within 3%), at that size and every
 * larger one measured, in all of
 *   - put ping-pong, one-way latency:
 *       GICE_PLANE=net|auto FI_TCP_IFACE=lo GICE_CT_RNDV_BYTES=0|1024 build/bin/gicerun -n 2 \
 *         build/bin/gice-bench put --csv --iters 1000 --provider P --sizes 2k,4k,...,1m
 *   - one put or get at a time, issue to completion, and 16 at a time:
 *       ... build/bin/gicerun -n 2 build/bin/gice-bench get --window 1|16 --provider P ...
 * Paths: net, the provider's fi_read (GICE_PLANE=net); plane, the NVLink plane's memcpy, with
 * the control packets over the provider. CTs sleeping: they slept at once when idle, as they do
 * when the job's devices on a machine outnumber its CPUs (medians of 11 runs: 8 at 1cc0c81, 3
 * at 477c69b, where two ranks on two cores slept so: their CT threads outnumbered the CPUs).
 * Spinning: one CT of each device spun after its last work, as two ranks on two cores do since
 * 4bfb696 (medians of 9 runs at 4bfb696, alternating packets and rendezvous). A read is
 * served by the target's progress (over tcp the bytes go out only while it polls) and a plane
 * get waits for the target's answer: a target whose CTs sleep answers a wake-up later, which
 * puts most of the crossovers further out. On the plane a rendezvous get costs no round trip
 * more than packets: gets cross over first. A provider not listed keeps the former 64 KiB.
 * These move with the engine: measure again after changing its packets or its sleeping. */
static const struct {
	const char *prefix;     /* as ct_provider_is */
	uint64_t from[2][2][2]; /* [CTs sleep, spin][put, get][net, plane] */
} rndv_table[] = {
	{"shm", {{{8192, 8192}, {32768, 4096}}, {{8192, 4096}, {8192, 2048}}}},
	{"tcp", {{{131072, 16384}, {262144, 2048}}, {{65536, 16384}, {65536, 4096}}}},
};

uint64_t ct_rndv_auto(const char *provider, int get, int plane, int spins)
{
	for (size_t i = 0; provider && i < GICE_ARRAY_SIZE(rndv_table); i++)
		if (ct_provider_is(provider, rndv_table[i].prefix))
			return rndv_table[i].from[!!spins][!!get][!!plane];
	return 65536;
}

int ct_rndv_choose(const ct_engine_t *e, const ct_peer_t *p, const ct_msg_t *m)
{
	uint64_t from = e->rndv_from[m->kind == MK_GET][p->map != NULL];

	fab_mr_info_t g;

	/* the side that moves the bytes must reach the other's memory: mapped on the plane, or
	 * both taking part in the provider's remote reads, and a put's source exposed (a grant) */
	return (m->kind == MK_PUT || m->kind == MK_GET) && (p->map || (e->rma && p->rma)) && from &&
	       m->req.len >= from && m->peer != e->attr.gid &&
	       (p->map || m->kind == MK_GET || !ct_grant_find(e, m->req.src_off, m->req.len, &g));
}

/* ---------------------------------------------------------------- the read table */

static struct ct_read *read_alloc(ct_engine_t *e)
{
	uint32_t i;

	if (e->n_reads_free)
		i = e->reads_free[--e->n_reads_free];
	else if (e->reads_fresh < CT_READS)
		i = e->reads_fresh++;
	else
		return NULL;
	return &e->reads[i];
}

static void read_free(ct_engine_t *e, struct ct_read *r)
{
	r->state = CT_RD_FREE;
	e->reads_free[e->n_reads_free++] = (uint32_t)(r - e->reads);
	atomic_fetch_sub_explicit(&e->msgs_adj, 1, memory_order_release);
}

/* Queue read r (filled in) for a fabric read slot, and post what can be posted. */
static void read_queue(ct_engine_t *e, struct ct_read *r)
{
	r->state = CT_RD_WAITING;
	e->reads_wait[(e->reads_wait_head + e->reads_waiting++) % CT_READS] = (uint32_t)(r - e->reads);
	atomic_fetch_add_explicit(&e->msgs_adj, 1, memory_order_relaxed); /* keeps CT 0 polling */
	ct_post_reads(e);
}

/* Post the reads waiting for a fabric read slot, oldest first. At most FAB_READS_MAX are posted
 * and not yet ended here: the endpoint frees a read's slot when it reaps the completion but
 * keeps the event, in room for FAB_READS_MAX, until fab_poll hands it out (a few per pass), so
 * a slot it reports free is not yet room for one more end. */
int ct_post_reads(ct_engine_t *e)
{
	int n = 0;

	while (e->reads_waiting && e->reads_posted < FAB_READS_MAX) {
		struct ct_read *r = &e->reads[e->reads_wait[e->reads_wait_head % CT_READS]];
		ct_peer_t *p = &e->peers[r->gid];
		/* with the grant the peer sent, nothing else: its provider checks key and bounds */
		int rc = fab_read(e->attr.ep, p->addr, r->off, r->len, &r->from, 0, r);
		if (rc == GICE_ERR_AGAIN)
			break; /* every slot busy: a read completion frees one */
		e->reads_wait_head++;
		e->reads_waiting--;
		e->reads_posted++;
		r->state = CT_RD_POSTED;
		if (rc) /* refused at once (logged by the fabric): it ends now */
			ct_read_done(e, r, rc);
		n++;
	}
	return n;
}

static void serve_end(ct_engine_t *e, ct_peer_t *p, uint32_t n)
{
	n = GICE_MIN(n, p->serving);
	p->serving -= n;
	atomic_fetch_sub_explicit(&e->serving, n, memory_order_relaxed);
}

void ct_reads_cancel(ct_engine_t *e, uint32_t gid)
{
	uint32_t keep = 0, n = e->reads_waiting;

	serve_end(e, &e->peers[gid], e->peers[gid].serving);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ri = e->reads_wait[(e->reads_wait_head + i) % CT_READS];
		if (e->reads[ri].gid == gid)
			read_free(e, &e->reads[ri]);
		else
			e->reads_wait[(e->reads_wait_head + keep++) % CT_READS] = ri;
	}
	e->reads_waiting = keep;
}

/* ---------------------------------------------------------------- puts, at the target */

/* The data of a rendezvous put is in place (or failed): it has landed; tell the initiator. */
static void rts_done(ct_engine_t *e, uint32_t gid, uint32_t msg_id, int status)
{
	ct_peer_t *p = &e->peers[gid];
	ct_rx_slot_t *s = &p->rx[msg_id & (CT_PEER_WIN - 1)];

	if (s->id1 == msg_id + 1) {
		if (status && s->status == GICE_OK)
			s->status = status;
		s->got = s->len;
		ct_landed(e, gid, p, s);
	}
	if (!ct_queue_response(e, MK_PUT_DONE, gid, 0, msg_id, 0, status))
		gice_error("ct", "no response entry for PUT_DONE of message %u to device %u", msg_id, gid);
}

void ct_rx_rts(ct_engine_t *e, ct_peer_t *p, ct_rx_slot_t *s, const ct_hdr_t *h, const uint8_t *grant)
{
	uint64_t off;
	int rc = hbm_translate_key(e->attr.hbm, h->rkey, h->roff, h->msg_len, &off);
	struct ct_read *r = NULL;

	/* a device never reads its own memory for a peer: what it sends itself goes by packets
	 * (ct_rndv_choose), so an announcement in its name is forged */
	if (h->src_gid == e->attr.gid)
		rc = GICE_ERR_INVALID;
	/* its PUT_DONE will need a response entry of the peer's share */
	if (!rc && !ct_resp_room(e, h->src_gid))
		rc = GICE_ERR_AGAIN;

	if (!rc && ct_rx_signal_check(e, s, h)) {
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	if (!rc && p->map) {
		/* NVLink plane: the initiator's memory is mapped here; the CT is the copy engine */
		if (h->aux > p->map_size || h->msg_len > p->map_size - h->aux) {
			ct_rx_fail(e, s, h, GICE_ERR_OUT_OF_BOUNDS);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		memcpy(e->base + off, p->map + h->aux, h->msg_len);
		rts_done(e, h->src_gid, h->msg_id, GICE_OK);
		return;
	}
	/* no reads here, or no grant: the sender maps us on the plane but this device could not
	 * map it (the warning at its open said why), and nothing else says where to read */
	if (!rc && (!e->rma || !h->payload_len))
		rc = GICE_ERR_UNSUPPORTED;
	if (!rc && !(r = read_alloc(e)))
		rc = GICE_ERR_AGAIN;
	if (rc) {
		ct_rx_fail(e, s, h, rc);
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	*r = (struct ct_read){.gid = h->src_gid, .msg_id = h->msg_id, .off = off, .len = h->msg_len,
			      .kind = CT_RD_PUT};
	ct_proto_grant_parse(grant, &r->from.key, &r->from.addr);
	read_queue(e, r);
}

/* ---------------------------------------------------------------- gets, at the target */

/* The requester reads the bytes of a rendezvous get itself, but over the provider its read
 * needs the target's progress too (tcp's is manual: the bytes go out only while the target
 * polls), which an idle device would not make: its CTs sleep, at once on a machine with more
 * CT threads than CPUs. So from its GET_GO until the requester's GET_DONE CT 0 keeps polling,
 * for GICE_TIMEOUT_MS after the last GET_GO at most (a GET_DONE lost on an unreliable
 * provider, or never sent by a requester that failed the get). */
void ct_serve_start(ct_engine_t *e, ct_peer_t *p)
{
	p->serving++;
	atomic_fetch_add_explicit(&e->serving, 1, memory_order_relaxed);
	atomic_store_explicit(&e->serve_until, gice_now_ns() + e->timeout_ns, memory_order_relaxed);
}

void ct_rx_get_done(ct_engine_t *e, ct_peer_t *p) { serve_end(e, p, 1); }

int ct_link_serving(ct_engine_t *e, uint64_t now)
{
	return atomic_load_explicit(&e->serving, memory_order_relaxed) &&
	       now < atomic_load_explicit(&e->serve_until, memory_order_relaxed);
}

/* ---------------------------------------------------------------- gets, at the requester */

/* Fail get idx, whose GET_GO this device cannot act on, saying why with the values. */
static void go_fail(ct_engine_t *e, uint32_t idx, const ct_hdr_t *h, int status, const char *why)
{
	ct_msg_t *m = &e->msgs[idx];

	if (h->payload_len) /* a grant: the target polls for our read until we say it ended */
		(void)ct_send_ctrl(e, m->peer, CT_PKT_GET_DONE, 0, 0, m->msg_id);
	gice_error("ct", "device %u: get of %llu bytes from device %u (msg %u), data at offset %llu there: %s; "
		   "the get fails with %s", e->attr.gid, (unsigned long long)m->req.len, m->peer, m->msg_id,
		   (unsigned long long)h->value, why, gice_status_name(status));
	ct_resp_done(e, idx, status);
}

void ct_rx_get_go(ct_engine_t *e, ct_peer_t *p, uint32_t idx, const ct_hdr_t *h, const uint8_t *grant)
{
	ct_msg_t *m = &e->msgs[idx];
	struct ct_read *r;

	m->recvd = m->req.len; /* the one GET_GO it takes */
	if (p->map) {
		/* NVLink plane: the target's memory is mapped here; the offset came off the wire */
		if (h->value > p->map_size || m->req.len > p->map_size - h->value) {
			ct_stat_add(e, CT_STAT_rx_bad, 1); /* a hostile GET_GO: once per get at most */
			go_fail(e, idx, h, GICE_ERR_OUT_OF_BOUNDS, "outside its memory");
			return;
		}
		memcpy(e->base + m->req.src_off, p->map + h->value, m->req.len);
		if (h->payload_len) /* a grant: the target, which does not map us, polls until this */
			(void)ct_send_ctrl(e, m->peer, CT_PKT_GET_DONE, 0, 0, m->msg_id);
		ct_resp_done(e, idx, GICE_OK);
		return;
	}
	if (!h->payload_len) {
		go_fail(e, idx, h, GICE_ERR_UNSUPPORTED,
			"no grant came with it (the target maps this device on the NVLink plane), and this device "
			"does not map the target (the warning at its open said why)");
		return;
	}
	if (!(r = read_alloc(e))) {
		go_fail(e, idx, h, GICE_ERR_AGAIN, "every rendezvous read entry is in use");
		return;
	}
	/* the target's provider bounds the read by the region the grant names */
	*r = (struct ct_read){.gid = m->peer, .msg_id = m->msg_id, .off = m->req.src_off, .len = m->req.len,
			      .kind = CT_RD_GET};
	ct_proto_grant_parse(grant, &r->from.key, &r->from.addr);
	read_queue(e, r);
}

/* A rendezvous read ended (posted: its FAB_EV_READ was taken, or it was refused at once). */
void ct_read_done(ct_engine_t *e, struct ct_read *r, int status)
{
	e->reads_posted--;
	if (r->kind == CT_RD_PUT) {
		rts_done(e, r->gid, r->msg_id, status);
	} else {
		uint32_t idx;
		/* the target may stop polling for it (ct_serve_start) */
		(void)ct_send_ctrl(e, r->gid, CT_PKT_GET_DONE, 0, 0, r->msg_id);
		ct_msg_t *m = ct_req_by_id(e, &e->peers[r->gid], r->msg_id, MK_GET, &idx);
		/* the get may have failed meanwhile (its peer died): then the read serves nothing */
		if (m && m->rndv && (m->need & NEED_RESP))
			ct_resp_done(e, idx, status);
	}
	read_free(e, r);
}
