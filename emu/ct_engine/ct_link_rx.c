/* ct_link_rx.c: the link's receive path — checksum and header validation, the sequence window,
 * requests (put data written only after its key, bounds and signal counter are checked; get and
 * atomic served), responses and NACKs matched to their requests, signals applied once a message
 * has landed, and when to acknowledge (at once, or a delayed ACK). Runs under the link lock. */
#include "emu/ct_engine/ct_internal.h"

#include <stdio.h>
#include <string.h>

#include "emu/common/tsan.h"

/* Received packets that make the receiver acknowledge at once: GICE_CT_ACK_EVERY, but never more
 * than half the sender's window (GICE_CT_CREDITS), so a window smaller than the ack interval
 * cannot close with every packet in it received and none acknowledged — and the sender gets the
 * ACK while it still has the other half to send. */
static uint32_t ack_thresh(const ct_engine_t *e)
{
	return GICE_MIN(e->ack_every, GICE_MAX(e->credits / 2, 1u));
}

/* Delayed ack: packets received and not yet acknowledged get an ACK after this long whatever the
 * counts (a sender whose window is smaller than this device's settings assume, e.g. another
 * process with a smaller GICE_CT_CREDITS). A quarter of GICE_RTO_MIN_US: well below the sender's
 * retransmission timeout. */
static uint64_t ack_delay_ns(const ct_engine_t *e)
{
	return e->rto_min_ns / 4;
}

ct_msg_t *ct_req_by_id(ct_engine_t *e, ct_peer_t *p, uint64_t msg_id, uint8_t kind, uint32_t *idx)
{
	uint32_t slot = p->by_id[msg_id & (CT_PEER_WIN - 1)];
	ct_msg_t *m;

	if (!slot)
		return NULL;
	m = &e->msgs[slot - 1];
	if (m->msg_id != msg_id || (kind != MK_ANY && m->kind != kind))
		return NULL;
	*idx = slot - 1;
	return m;
}

void ct_resp_done(ct_engine_t *e, uint32_t idx, int status)
{
	ct_msg_t *m = &e->msgs[idx];

	if (status && !m->status)
		m->status = status;
	m->need &= (uint8_t)~NEED_RESP;
	if (!m->need)
		ct_complete_msg(e, idx);
}

/* Remember the counters a peer signals (a few, most recent first out): they are what this
 * device waits on for that peer. */
static void note_signal(ct_peer_t *p, uint32_t sig)
{
	for (uint32_t i = 0; i < CT_SIG_RECENT; i++)
		if (p->sig_recent[i] == sig + 1)
			return;
	p->sig_recent[p->sig_next++ % CT_SIG_RECENT] = sig + 1;
}

/* Log a rejected signal: per-message path, rate-limited, with the count so far. */
static void signal_reject_log(ct_engine_t *e, uint32_t src, uint32_t msg_id, uint32_t sig_id, int status,
			      const char *what)
{
	uint64_t n = ct_stat_add(e, CT_STAT_rx_bad_signal, 1);

	if (CT_LOG_DUE(n))
		gice_warn("ct", "device %u: put from device %u (msg %u) signals counter %u, %s (signal counters are "
			  "the allocated ids in %u..%u): %s (%llu so far)", e->attr.gid, src, msg_id, sig_id,
			  status == GICE_ERR_NOT_FOUND ? "which is not allocated" : "which is reserved or out of range",
			  e->attr.n_cts, e->n_counters - 1, what, (unsigned long long)n + 1);
}

/* GICE_OK if counter id may take a signal: one of this device's allocatable ids (not reserved,
 * in range: else GICE_ERR_INVALID) that is allocated now (else GICE_ERR_NOT_FOUND). The
 * allocation is known in the process that created the trigger memory, where the CT runs; a region
 * attached from elsewhere cannot tell, and then only the range is checked. */
static int signal_ok(const ct_engine_t *e, uint32_t id)
{
	if (id < e->attr.n_cts || id >= e->n_counters)
		return GICE_ERR_INVALID;
	return tm_counter_allocated(e->attr.tm, id) == 0 ? GICE_ERR_NOT_FOUND : GICE_OK;
}

static void signal_write(ct_engine_t *e, uint32_t src, uint32_t id, uint64_t v, int add)
{
	if (add)
		tm_counter_add(e->attr.tm, id, v);
	else
		tm_counter_set(e->attr.tm, id, v);
	note_signal(&e->peers[src], id);
}

/* Write the open run of summed adds, if any (ct_rx_signals_batch). */
static void run_end(ct_engine_t *e)
{
	if (e->sig_src != CT_NIL)
		signal_write(e, e->sig_src, e->sig_id, e->sig_sum, 1);
	e->sig_src = CT_NIL;
}

void ct_rx_signals_batch(ct_engine_t *e)
{
	e->sig_batch = 1;
	e->sig_src = CT_NIL;
}

void ct_rx_signals_flush(ct_engine_t *e)
{
	run_end(e);
	e->sig_batch = 0;
}

static void apply_signal(ct_engine_t *e, uint32_t src, const ct_rx_slot_t *s)
{
	int rc = signal_ok(e, s->sig_id), add = !!(s->flags & CT_HF_SIG_ADD);

	/* validated at every packet; only a counter freed since (a strong signal waits) gets here */
	if (rc) {
		signal_reject_log(e, src, s->id1 - 1, s->sig_id, rc, "freed after the put was accepted; not applied");
		return;
	}
	if (!e->sig_batch) {
		signal_write(e, src, s->sig_id, s->value, add);
		return;
	}
	if (add && e->sig_src == src && e->sig_id == s->sig_id) {
		e->sig_sum += s->value;
		return;
	}
	run_end(e); /* the run so far first: the writes keep their order */
	if (!add) {
		signal_write(e, src, s->sig_id, s->value, 0);
		return;
	}
	e->sig_src = src; /* a new run */
	e->sig_id = s->sig_id;
	e->sig_sum = s->value;
}

/* A request message has landed: weak signals apply now, strong ones once every earlier
 * message from this peer has landed. */
void ct_landed(ct_engine_t *e, uint32_t src, ct_peer_t *p, ct_rx_slot_t *s)
{
	ct_rx_trace_t *tr = &e->rx_trace[e->rx_trace_n++ % CT_TRACE_RING];

	*tr = (ct_rx_trace_t){.src_gid = src, .msg_id = s->id1 - 1, .t_landed = gice_now_ns()};
	s->landed = 1;
	if (s->status == GICE_OK && (s->flags & CT_HF_SIGNAL) && !(s->flags & CT_HF_STRONG))
		apply_signal(e, src, s);
	for (;;) {
		ct_rx_slot_t *h = &p->rx[p->rx_landed & (CT_PEER_WIN - 1)];
		if (h->id1 != p->rx_landed + 1 || !h->landed)
			break;
		if (h->status == GICE_OK && (h->flags & CT_HF_STRONG))
			apply_signal(e, src, h);
		h->id1 = 0;
		p->rx_landed++;
	}
}

static ct_rx_slot_t *rx_slot(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h)
{
	ct_rx_slot_t *s = &p->rx[h->msg_id & (CT_PEER_WIN - 1)];

	if (s->id1 == h->msg_id + 1)
		return s;
	if (s->id1 || ct_psn_before(h->msg_id, p->rx_landed) || h->msg_id - p->rx_landed >= CT_PEER_WIN) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n))
			gice_error("ct", "message %u from device %u is outside the receive window [%u, +%u): dropped "
				   "(%llu packets dropped so far)", h->msg_id, h->src_gid, p->rx_landed, CT_PEER_WIN,
				   (unsigned long long)n + 1);
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	s->id1 = h->msg_id + 1;
	s->len = h->msg_len;
	s->flags = h->flags;
	s->sig_id = h->sig_id;
	s->value = h->value;
	return s;
}

void ct_rx_fail(ct_engine_t *e, ct_rx_slot_t *s, const ct_hdr_t *h, int status)
{
	if (s->status == GICE_OK) {
		/* once per message, with the values involved */
		uint64_t n = e->n_refused++;
		char cause[160] = "";
		if (h->op == CT_PKT_GET_REQ && h->aux && h->aux < CT_MTU_MIN) /* the cause: say it */
			snprintf(cause, sizeof(cause), ", answer in packets of %llu bytes", (unsigned long long)h->aux);
		else if (h->op == CT_PKT_PUT_RTS && !h->payload_len && status == GICE_ERR_UNSUPPORTED)
			snprintf(cause, sizeof(cause), ", its bytes at offset %llu of device %u on the NVLink plane (no grant "
				 "came with them), which this device does not map", (unsigned long long)h->aux,
				 h->src_gid);
		if (CT_LOG_DUE(n)) /* a peer can send these as fast as it likes */
			gice_error("ct", "%s from device %u (msg %u): key 0x%llx offset %llu length %llu%s: %s "
				   "(%llu refused so far)", ct_pkt_name(h->op), h->src_gid, h->msg_id,
				   (unsigned long long)h->rkey, (unsigned long long)h->roff,
				   (unsigned long long)(h->op == CT_PKT_GET_REQ || h->op == CT_PKT_GET_RNDV ? h->value
													   : h->msg_len),
				   cause, gice_status_name(status), (unsigned long long)n + 1);
		s->status = status;
		ct_send_nack(e, h->src_gid, h->msg_id, status);
	}
}

/* Check the signal of a PUT or PUT_RTS (if it has one) before a byte of it is written. A bad one
 * fails the whole message: counted, logged (rate-limited) and NACKed once per message. */
int ct_rx_signal_check(ct_engine_t *e, ct_rx_slot_t *s, const ct_hdr_t *h)
{
	int rc;

	if (!(h->flags & CT_HF_SIGNAL) || !(rc = signal_ok(e, h->sig_id)))
		return GICE_OK;
	if (s->status == GICE_OK) {
		signal_reject_log(e, h->src_gid, h->msg_id, h->sig_id, rc, "nothing written, NACK sent");
		s->status = rc;
		ct_send_nack(e, h->src_gid, h->msg_id, rc);
	}
	return rc;
}

void ct_rx_request(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload)
{
	ct_rx_slot_t *s = rx_slot(e, p, h);
	uint64_t off;
	int rc;

	if (!s)
		return; /* counted */
	switch (h->op) {
	case CT_PKT_PUT:
		/* the whole message range is checked at every packet: all or nothing lands */
		rc = hbm_translate_key(e->attr.hbm, h->rkey, h->roff, h->msg_len, &off);
		if (rc)
			ct_rx_fail(e, s, h, rc);
		/* and its signal counter: a put signalling no counter lands nothing */
		else if (!ct_rx_signal_check(e, s, h) && s->status == GICE_OK && h->payload_len)
			memcpy(e->base + off + h->moff, payload, h->payload_len);
		s->got += h->payload_len;
		if (s->got >= s->len && (h->payload_len || s->len == 0))
			ct_landed(e, h->src_gid, p, s);
		return;
	case CT_PKT_PUT_RTS:
		ct_rx_rts(e, p, s, h, payload);
		return;
	case CT_PKT_GET_REQ:
	case CT_PKT_GET_RNDV:
	case CT_PKT_ATOMIC_REQ: {
		uint64_t len = h->op == CT_PKT_ATOMIC_REQ ? 8 : h->value;
		/* a response message carries at most UINT32_MAX bytes (msg_len); GET_REQ's aux, the
		 * requester's packet size, 0 (ours) or at least the smallest GICE_MTU */
		rc = len > UINT32_MAX || (h->op == CT_PKT_GET_REQ && h->aux && h->aux < CT_MTU_MIN)
			     ? GICE_ERR_INVALID
			     : hbm_translate_key(e->attr.hbm, h->rkey, h->roff, len, &off);
		if (!rc && h->op == CT_PKT_ATOMIC_REQ && (off & 7))
			rc = GICE_ERR_INVALID;
		if (!rc && !ct_resp_room(e, h->src_gid))
			rc = GICE_ERR_AGAIN; /* counted in resp_refused */
		if (rc) {
			ct_rx_fail(e, s, h, rc);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		if (h->op == CT_PKT_ATOMIC_REQ) {
			_Atomic uint64_t *w = (_Atomic uint64_t *)(e->base + off);
			uint64_t old = h->aux;
			if (h->flags & CT_HF_CSWAP)
				atomic_compare_exchange_strong(w, &old, h->value); /* old value either way */
			else
				old = atomic_fetch_add(w, h->value);
			ct_queue_response(e, MK_AMO_RESP, h->src_gid, h->qos, h->msg_id, old, GICE_OK);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		if (h->op == CT_PKT_GET_RNDV) {
			/* validated: the requester reads the range itself once GET_GO tells it where */
			ct_msg_t *m = ct_queue_response(e, MK_GET_RESP, h->src_gid, h->qos, h->msg_id, off, GICE_OK);
			m->rndv = 1;
			m->req.len = len;
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		ct_msg_t *m = ct_queue_response(e, MK_GET_RESP, h->src_gid, h->qos, h->msg_id, 0, GICE_OK);
		m->req.src_off = off;
		m->req.len = len;
		/* cut responses to the requester's packet size (GET_REQ aux), never above ours */
		m->mtu = (uint32_t)GICE_MIN((uint64_t)e->mtu_max, h->aux ? h->aux : e->mtu_max) - CT_HDR_BYTES;
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	}
}

static void rx_response(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload)
{
	uint32_t idx;
	uint8_t kind = h->op == CT_PKT_PUT_DONE ? MK_PUT : h->op == CT_PKT_ATOMIC_RESP ? MK_AMO : MK_GET;
	ct_msg_t *m = ct_req_by_id(e, p, h->aux, kind, &idx);

	if (!m || !(m->need & NEED_RESP)) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n))
			gice_error("ct", "%s from device %u for unknown request %llu: dropped (%llu packets dropped so far)",
				   ct_pkt_name(h->op), h->src_gid, (unsigned long long)h->aux, (unsigned long long)n + 1);
		return;
	}
	if (h->status) {
		ct_resp_done(e, idx, h->status);
		return;
	}
	if (h->op == CT_PKT_PUT_DONE) {
		ct_resp_done(e, idx, GICE_OK);
		return;
	}
	if (h->op == CT_PKT_ATOMIC_RESP) {
		if (!(m->req.flags & CT_RF_NO_RESULT))
			memcpy(e->base + m->req.src_off, &h->value, 8);
		ct_resp_done(e, idx, GICE_OK);
		return;
	}
	/* a rendezvous get takes one GET_GO and no data; any other get only data */
	if (h->msg_len != m->req.len || (h->op == CT_PKT_GET_GO) != m->rndv || (m->rndv && m->recvd)) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n))
			gice_error("ct", "%s of %u bytes from device %u for a %sget of %llu (msg %u): dropped (%llu packets "
				   "dropped so far)", ct_pkt_name(h->op), h->msg_len, h->src_gid, m->rndv ? "rendezvous " : "",
				   (unsigned long long)m->req.len, m->msg_id, (unsigned long long)n + 1);
		return;
	}
	if (m->rndv) {
		ct_rx_get_go(e, p, idx, h, payload);
		return;
	}
	memcpy(e->base + m->req.src_off + h->moff, payload, h->payload_len);
	m->recvd += h->payload_len;
	if (m->recvd >= m->req.len)
		ct_resp_done(e, idx, GICE_OK);
}

void ct_rx_message(ct_engine_t *e, const uint8_t *buf, size_t len, fab_addr_t from)
{
	while (len) {
		size_t n = ct_proto_next(buf, len);
		if (!n) {
			uint64_t c = ct_stat_add(e, CT_STAT_rx_bad, 1);
			if (CT_LOG_DUE(c))
				gice_warn("ct", "dropped %zu trailing bytes of a fabric message: not a whole packet (%llu so far)",
					  len, (unsigned long long)c + 1);
			return;
		}
		ct_rx_packet(e, buf, n, from);
		buf += n;
		len -= n;
	}
}

/* 0 if the packet (parsed into h) is the job's and comes from the device it claims; else it is
 * counted and logged (rate-limited) and -1. */
static int rx_authentic(ct_engine_t *e, const uint8_t *buf, const ct_hdr_t *h, fab_addr_t from)
{
	const char *why;
	char what[96];

	if (!e->auth)
		return 0;
	if (!ct_proto_mac_ok(buf, e->attr.job_key)) {
		why = h->mac ? "its MAC is not the job's (a packet from outside this job?)"
			     : "it carries no MAC (GICE_CT_AUTH=0 at its sender?)";
	} else if (e->attr.ep->source && h->src_gid < e->max_peers && e->peers[h->src_gid].present &&
		   from != e->peers[h->src_gid].addr) {
		snprintf(what, sizeof(what), "it came from another endpoint than device %u's (fabric address %s%llu)",
			 h->src_gid, from == FAB_ADDR_UNKNOWN ? "unknown, not " : "",
			 (unsigned long long)(from == FAB_ADDR_UNKNOWN ? e->peers[h->src_gid].addr : from));
		why = what;
	} else {
		return 0;
	}
	uint64_t n = ct_stat_add(e, CT_STAT_rx_auth_bad, 1);
	if (CT_LOG_DUE(n))
		gice_warn("ct", "device %u: dropped %s claiming to come from device %u: %s (%llu so far)", e->attr.gid,
			  ct_pkt_name(h->op), h->src_gid, why, (unsigned long long)n + 1);
	return -1;
}

void ct_rx_packet(ct_engine_t *e, const uint8_t *buf, size_t len, fab_addr_t from)
{
	ct_hdr_t h;
	const char *why;
	ct_peer_t *p;

	GICE_TSAN_IN(); /* arriving from another process (tsan.h) */
	/* the checksum first (when on, or claimed): a corrupted header is a checksum failure */
	if ((atomic_load_explicit(&e->csum, memory_order_relaxed) ||
	     (len > CT_HDR_FLAGS_OFF && (buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM))) &&
	    !((buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM) && ct_proto_csum_ok(buf, len))) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_csum_bad, 1);
		ct_rx_csum_peer(e, buf, len);
		if (CT_LOG_DUE(n)) /* per-packet path: rate-limited */
			gice_warn("ct", "dropped a packet of %zu bytes: %s (%llu so far)", len,
				  len > CT_HDR_FLAGS_OFF && (buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM)
					  ? "CRC32C mismatch" : "no checksum (GICE_CHECKSUM is on)",
				  (unsigned long long)n + 1);
		return;
	}
	if (ct_proto_parse(buf, len, &h, &why)) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n))
			gice_warn("ct", "dropped a malformed packet of %zu bytes: %s (%llu so far)", len, why,
				  (unsigned long long)n + 1);
		return;
	}
	if (rx_authentic(e, buf, &h, from))
		return;
	if (h.src_gid < e->max_peers && e->peers[h.src_gid].dead && h.dst_gid == e->attr.gid &&
	    (h.op == CT_PKT_BYE || h.op == CT_PKT_HEARTBEAT || h.op == CT_PKT_ACK || h.op == CT_PKT_GET_DONE))
		return; /* late control packets of a peer we gave up on */
	if (h.op == CT_PKT_HEARTBEAT && h.dst_gid == e->attr.gid && h.src_gid < e->max_peers &&
	    !e->peers[h.src_gid].present)
		return; /* early: a peer that wired this device before this device wired it (the
			 * opens of a job are not a barrier); its watchdog's heartbeat carries nothing
			 * (our watchdog's clock for it starts at its first look) */
	if (h.dst_gid != e->attr.gid || h.src_gid >= e->max_peers || !e->peers[h.src_gid].present ||
	    e->peers[h.src_gid].dead) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_unknown_peer, 1);
		if (CT_LOG_DUE(n))
			gice_warn("ct", "dropped %s from device %u to device %u (this is device %u%s; %llu so far)",
				  ct_pkt_name(h.op), h.src_gid, h.dst_gid, e->attr.gid,
				  h.src_gid < e->max_peers && e->peers[h.src_gid].dead ? ", sender declared dead" : "",
				  (unsigned long long)n + 1);
		return;
	}
	p = &e->peers[h.src_gid];
	atomic_store_explicit(&p->t_rx, gice_coarse_ns(), memory_order_relaxed); /* silence: 100s of ms */
	if (p->tm) /* counted by its kick (ct_step.c) */
		atomic_store_explicit(&e->rx_local, atomic_load_explicit(&e->rx_local, memory_order_relaxed) + 1,
				      memory_order_release);
	switch (h.op) {
	case CT_PKT_ACK:
		ct_rx_ack(e, p, h.psn, (uint32_t)h.value, h.aux, gice_now_ns());
		return;
	case CT_PKT_HEARTBEAT:
		return;
	case CT_PKT_BYE:
		ct_peer_fail(e, h.src_gid, GICE_ERR_PEER_DEAD, "closed its device");
		return;
	case CT_PKT_FAULT:
		ct_rx_fault(e, &h);
		return;
	case CT_PKT_GET_DONE:
		ct_rx_get_done(e, p);
		return;
	}

	tm_progress(e->attr.tm);
	/* sequenced packets: each psn is processed once */
	uint32_t d = h.psn - p->rx_next_psn;
	if ((int32_t)d < 0 || (d < CT_PSN_WIN && (p->rx_seen[(h.psn / 64) % (CT_PSN_WIN / 64)] >> (h.psn % 64)) & 1)) {
		ct_stat_add(e, CT_STAT_rx_dup, 1);
		ct_send_ack(e, h.src_gid);
		return;
	}
	if (d >= CT_PSN_WIN) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n))
			gice_warn("ct", "psn %u from device %u is beyond the window (next %u): dropped (%llu packets dropped "
				  "so far)", h.psn, h.src_gid, p->rx_next_psn, (unsigned long long)n + 1);
		return;
	}
	p->rx_seen[(h.psn / 64) % (CT_PSN_WIN / 64)] |= 1ull << (h.psn % 64);
	ct_stat_add_peer(e, p, CT_STAT_rx_pkts, 1); /* first arrival: as the sender's tx_pkts */
	ct_stat_add_peer(e, p, CT_STAT_rx_bytes, h.payload_len);
	while ((p->rx_seen[(p->rx_next_psn / 64) % (CT_PSN_WIN / 64)] >> (p->rx_next_psn % 64)) & 1) {
		p->rx_seen[(p->rx_next_psn / 64) % (CT_PSN_WIN / 64)] &= ~(1ull << (p->rx_next_psn % 64));
		p->rx_next_psn++;
	}

	if (h.op == CT_PKT_NACK) {
		uint32_t idx;
		ct_msg_t *m = ct_req_by_id(e, p, h.msg_id, MK_ANY, &idx);
		if (m && h.status < 0)
			ct_resp_done(e, idx, h.status);
	} else if (h.op == CT_PKT_GET_RESP || h.op == CT_PKT_GET_GO || h.op == CT_PKT_ATOMIC_RESP ||
		   h.op == CT_PKT_PUT_DONE) {
		rx_response(e, p, &h, buf + CT_HDR_BYTES);
	} else if (h.op == CT_PKT_PUTS) {
		ct_rx_puts(e, p, &h, buf + CT_HDR_BYTES);
	} else {
		ct_rx_request(e, p, &h, buf + CT_HDR_BYTES);
	}
	/* an ack riding on the packet: it covers what the peer received before sending it; in a
	 * waiting kernel's pass its completions wait for the next pass (ct_ack_in_defer) */
	if ((h.flags & CT_HF_ACK) && e->ack_defer)
		ct_ack_in_defer(e, h.src_gid, h.ack, h.psn + 1, gice_now_ns());
	else if (h.flags & CT_HF_ACK)
		ct_rx_ack(e, p, h.ack, h.psn + 1, 0, gice_now_ns());
	/* an ack that waited for the packets we had not yet received from this peer */
	if (p->ack_held && !ct_psn_before(p->rx_next_psn, p->held_fence)) {
		p->ack_held = 0;
		ct_complete_upto(e, p, p->held_cum);
	}
	/* ack every ack_thresh packets, and at once when this packet left a hole (the selective ack
	 * lets the sender resend just the hole); a message end by the next pass of the link, on
	 * whatever we send this peer before (a reply carries it); whatever else is left unacked
	 * gets a delayed ack (ct_flush_delayed_acks) */
	if (p->ack_unsent + 1 >= ack_thresh(e) || d != 0 || p->rx_next_psn != h.psn + 1) {
		ct_send_ack(e, h.src_gid); /* not sent now: flush_ctrl retries it */
		return;
	}
	if (p->ack_unsent++ == 0) { /* only a packet left unacknowledged pays for the timer */
		p->t_ack_wait = gice_now_ns();
		uint32_t n = atomic_load_explicit(&e->acks_delayed, memory_order_relaxed);
		e->dack_peers[n] = h.src_gid;
		p->dack_pos = n + 1;
		atomic_store_explicit(&e->acks_delayed, n + 1, memory_order_relaxed);
		if (e->dack_next_ns > p->t_ack_wait + ack_delay_ns(e))
			e->dack_next_ns = p->t_ack_wait + ack_delay_ns(e);
	}
	if ((h.flags & CT_HF_LAST) && (h.op == CT_PKT_PUT || h.op == CT_PKT_PUTS || h.op == CT_PKT_GET_REQ || h.op == CT_PKT_ATOMIC_REQ ||
				       h.op == CT_PKT_PUT_RTS || h.op == CT_PKT_GET_RNDV)) {
		p->ack_soon = e->pass;
		e->dack_next_ns = 0;
	} else if (h.flags & CT_HF_LAST) {
		/* a response: the responder holds an entry of its response pool until this ack; no
		 * reply will carry it */
		ct_send_ack(e, h.src_gid);
	}
}

/* Send the ACKs owed for longer than ack_delay_ns (see there). */
int ct_flush_delayed_acks(ct_engine_t *e, uint64_t now)
{
	uint64_t delay = ack_delay_ns(e), next = UINT64_MAX;
	int n = 0;

	if (now < e->dack_next_ns)
		return 0;
	/* backwards: an ACK sent takes its peer out of the list, the last one (seen) into its place */
	for (uint32_t i = atomic_load_explicit(&e->acks_delayed, memory_order_relaxed); i-- > 0;) {
		uint32_t g = e->dack_peers[i];
		ct_peer_t *p = &e->peers[g];
		if (p->ack_due) /* already retried by flush_ctrl */
			continue;
		if (now - p->t_ack_wait >= delay || (p->ack_soon && p->ack_soon != e->pass)) {
			ct_send_ack(e, g);
			n++;
		} else if (p->ack_soon) {
			next = 0; /* a message end seen in this pass: the next one acks it */
		} else if (p->t_ack_wait + delay < next) {
			next = p->t_ack_wait + delay;
		}
	}
	e->dack_next_ns = next;
	return n;
}
