/* ct_link_internal.h: the entry points of the link's modules (ct_link.c and ct_link_*.c: passes,
 * sending, receiving, reliability, rendezvous and its grants, the link's watchdog), for the
 * engine's files. Included at the end of ct_internal.h, whose types it uses. */
#ifndef GICE_CT_LINK_INTERNAL_H
#define GICE_CT_LINK_INTERNAL_H

#include "emu/ct_engine/ct_internal.h"

/* ct_link.c: progress and completion */
/* One pass of the link if no one else holds it; a holder comes round again for what was handed
 * over meanwhile (link_pending). Returns the work done. */
int ct_link_progress(struct ct_engine *e);
/* The same for a waiting kernel: the ACKs riding on what it takes in wait for the next pass
 * (ct_ack_in_defer), after the kernel has seen what it waits for. */
int ct_link_progress_waiting(struct ct_engine *e);
/* The same, as a last look before sleeping (a waiting kernel that stops stepping): it takes in
 * what arrived but leaves the ACKs of message ends owed to the next pass, so that a reply the
 * kernel sends next carries them. */
int ct_link_look(struct ct_engine *e);
/* A pass that only sends (no fabric poll): for a kernel that has just queued a request. */
int ct_link_send(struct ct_engine *e);
/* The same, and the corked bundle goes too, its cork kept for the puts that follow (every
 * CT_PUSH_PUTS puts of a kernel's burst: ct_step.c). */
int ct_link_push(struct ct_engine *e);
/* CT 0's sleep when it found no work (seq: its doorbell before it looked): on its doorbell, and
 * also on the fabric's wait fd when the provider has one and nothing is in flight. */
void ct_link_sleep(struct ct_engine *e, uint32_t seq, uint64_t timeout_ns);
int ct_link_busy(struct ct_engine *e);
/* Whether a busy link needs CT 0 on a short timer when no kernel steps it: work that no
 * arrival announces (ct_link.c); issuing: what is left of it while a kernel issues requests.
 * Read without the link lock. */
int ct_link_needs_timer(struct ct_engine *e, int issuing);
/* Whether a poll of the fabric can find nothing same-host peers announced: every packet they
 * counted in their kicks taken in, every poke seen, and no peer elsewhere (no one counts
 * theirs). Read without the link lock. */
int ct_link_nothing_announced(struct ct_engine *e);
/* Kick same-host peer p's CT 0: n packets sent it, or a poke (0). A kick its kernel's lease takes
 * (tm_doorbell_lease: the kernel is issuing and looks at its link itself) is nudged at the
 * lease's end by the passes of this link, until it rings or someone there is awake. */
void ct_kick(struct ct_engine *e, ct_peer_t *p, uint32_t n);
/* Ring p's CT 0 unless someone there is awake or a lease runs (then again at its end). */
void ct_nudge(struct ct_engine *e, ct_peer_t *p);
/* Nudge every such kick now, ringing those a lease still takes: for a kernel that stops
 * stepping, which would otherwise leave them to a timer of CT 0's. */
void ct_link_settle(struct ct_engine *e);
void ct_complete_msg(struct ct_engine *e, uint32_t idx);
/* ct_link_tx.c: the MPG and everything sent (ct_link_xmit.c: onto the fabric) */
int ct_send_pending(struct ct_engine *e);
/* What sending a message's next packet did (ct_link_tx.c, ct_link_puts.c): a packet out and more
 * to send; its last out; nothing, no credit; nothing, the fabric takes no more now; the message
 * and those sent with it are on their way or failed (PUTS). */
enum { CT_SEND_OK, CT_SEND_DONE, CT_SEND_BLOCKED, CT_SEND_FULL, CT_SEND_TAKEN };
/* p's acknowledged psn, counting the ACK left for the next pass (ct_ack_in_defer): what the
 * peer has told us it received, for the cork (ct_link_xmit.c, ct_link.c). Credits and the
 * retransmission ring move only when it is processed. */
static inline uint32_t ct_acked_psn(const struct ct_engine *e, const ct_peer_t *p)
{
	if (atomic_load_explicit(&e->ackin_gid, memory_order_relaxed) == (uint32_t)(p - e->peers) &&
	    ct_psn_before(p->acked_psn, e->ackin_cum))
		return e->ackin_cum;
	return p->acked_psn;
}
/* The peer's window of unacknowledged packets is full (credits; congestion window). */
static inline int ct_tx_window_full(const struct ct_engine *e, const ct_peer_t *p)
{
	return p->next_psn - p->acked_psn >= e->credits ||
	       (atomic_load_explicit(&e->reliable, memory_order_relaxed) && p->next_psn - p->acked_psn >= p->cwnd);
}
/* The wire's signal flags (SIGNAL, SIG_ADD, STRONG) of request r: 0 when it signals nothing. */
static inline uint8_t ct_sig_flags(const ct_req_t *r)
{
	if (!(r->flags & CT_RF_SIGNAL))
		return 0;
	return CT_HF_SIGNAL | ((r->flags & CT_RF_SIG_ADD) ? CT_HF_SIG_ADD : 0) | ((r->flags & CT_RF_STRONG) ? CT_HF_STRONG : 0);
}
/* An ACK owed to p may ride on the next packet to it: no selective part, no NACK waiting. */
int ct_ack_rides(const ct_peer_t *p);
/* Send sequenced packet h (psn: p's next) and its plen payload bytes, with the ACK we owe p when
 * may_piggy and it may ride; once the fabric took it, keep it for retransmission (its payload at
 * device offset poff, CT_POFF_GRANT: the grant at payload, CT_POFF_PUTS: built again) and count
 * it. ct_xmit's status. */
int ct_send_seq(struct ct_engine *e, ct_peer_t *p, ct_hdr_t *h, int may_piggy, const void *payload, uint32_t plen,
		uint64_t poff);
/* Small puts (ct_link_puts.c): whether message idx, just taken from class q's list, starts a
 * PUTS (the next in the list is a small put to the same peer too); send it with as many of those
 * after it as fit (CT_SEND_TAKEN, or CT_SEND_FULL with idx the caller's to put back); the payload
 * of a PUTS sent (hdr, plen bytes) built again from its messages, NULL if one is gone; a PUTS
 * received, each entry taken as the PUT it stands for. */
int ct_puts_start(const struct ct_engine *e, uint32_t q, uint32_t idx);
int ct_puts_send(struct ct_engine *e, uint32_t q, uint32_t idx);
const void *ct_puts_rebuild(struct ct_engine *e, ct_peer_t *p, const uint8_t *hdr, uint32_t plen);
void ct_rx_puts(struct ct_engine *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload);
/* Around the puts of one PUTS packet (ct_rx_puts): the adds they signal, landed one after
 * another, are written as one add per run of puts to the same counter, at the run's end (each
 * put's bytes are in place before the add that covers it: a waiter sees what it counts). */
void ct_rx_signals_batch(struct ct_engine *e);
void ct_rx_signals_flush(struct ct_engine *e);
void ct_rx_request(struct ct_engine *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload);
/* Send one encoded packet to p: it joins the bundle of packets to p that leaves at the end of
 * the pass (ct_bundle_flush, also before a packet to another peer or a large one). */
int ct_xmit(struct ct_engine *e, ct_peer_t *p, uint8_t *hdr, const void *payload, uint32_t plen);
int ct_send_ctrl(struct ct_engine *e, uint32_t gid, uint8_t op, uint32_t psn, uint64_t value, uint64_t aux);
void ct_send_ack(struct ct_engine *e, uint32_t gid);
void ct_send_nack(struct ct_engine *e, uint32_t gid, uint32_t msg_id, int status);
void ct_nack_done(struct ct_engine *e, ct_msg_t *m);
void ct_ack_owed_clear(struct ct_engine *e, ct_peer_t *p);
void ct_ack_sent(struct ct_engine *e, ct_peer_t *p);
/* 1 if peer gid may take one more response entry (its share, and the pool, have room). */
int ct_resp_room(const struct ct_engine *e, uint32_t gid);
ct_msg_t *ct_queue_response(struct ct_engine *e, uint8_t kind, uint32_t gid, uint8_t qos, uint32_t msg_id,
			     uint64_t value, int status);
/* ct_link_rx.c: the receive path */
/* One fabric message: its packets (a bundle of one or more), in order. */
/* A fabric message (one or more packets back to back) that arrived from fabric address from
 * (FAB_ADDR_UNKNOWN when the endpoint cannot tell). */
void ct_rx_message(struct ct_engine *e, const uint8_t *buf, size_t len, fab_addr_t from);
void ct_rx_packet(struct ct_engine *e, const uint8_t *buf, size_t len, fab_addr_t from);
/* The request message msg_id to peer p, of kind (MK_ANY: any), with its index in *idx; or NULL. */
ct_msg_t *ct_req_by_id(struct ct_engine *e, ct_peer_t *p, uint64_t msg_id, uint8_t kind, uint32_t *idx);
/* Request idx has its response (status: how it ended); it completes if nothing else is due. */
void ct_resp_done(struct ct_engine *e, uint32_t idx, int status);
int ct_flush_delayed_acks(struct ct_engine *e, uint64_t now);
void ct_landed(struct ct_engine *e, uint32_t src, ct_peer_t *p, ct_rx_slot_t *s);
void ct_rx_fail(struct ct_engine *e, ct_rx_slot_t *s, const ct_hdr_t *h, int status);
int ct_rx_signal_check(struct ct_engine *e, ct_rx_slot_t *s, const ct_hdr_t *h);
/* ct_link_rel.c: acks, retransmission, congestion window */
void ct_rx_ack(struct ct_engine *e, ct_peer_t *p, uint32_t cum, uint32_t fence, uint64_t sack, uint64_t t_rx);
/* An ACK riding on a packet from peer gid, arrived at t_rx: processed by the next pass of the
 * link (ct_ack_in_drain), after what this one took in has reached its waiters and, on a
 * kernel's request, after that request's send. An older one still left is processed first. */
void ct_ack_in_defer(struct ct_engine *e, uint32_t gid, uint32_t cum, uint32_t fence, uint64_t t_rx);
/* Process the ACK left for this pass, if any; 1 if there was one. */
int ct_ack_in_drain(struct ct_engine *e);
void ct_complete_upto(struct ct_engine *e, ct_peer_t *p, uint32_t cum);
int ct_check_rto(struct ct_engine *e, uint64_t now);
int ct_poke_silent(struct ct_engine *e, uint64_t now);
/* ct_link_rndv.c: rendezvous — large puts at the target, large gets at the requester */
/* The size GICE_CT_RNDV_BYTES=auto stands for, measured per provider, op (get 0: put), path
 * (plane 1: the NVLink plane's copy, 0: the provider's remote read) and whether the devices' CTs
 * spin when idle (spins 1: the device's share of the CPUs, ct_params.c; 0: they sleep at once). */
uint64_t ct_rndv_auto(const char *provider, int get, int plane, int spins);
/* Whether message m (a put or get to peer p, not yet started) moves its data by rendezvous. */
int ct_rndv_choose(const struct ct_engine *e, const ct_peer_t *p, const ct_msg_t *m);
void ct_rx_rts(struct ct_engine *e, ct_peer_t *p, ct_rx_slot_t *s, const ct_hdr_t *h, const uint8_t *grant);
/* GET_GO for get idx from peer p: the target validated the range; read it (or copy it). */
void ct_rx_get_go(struct ct_engine *e, ct_peer_t *p, uint32_t idx, const ct_hdr_t *h, const uint8_t *grant);
int ct_post_reads(struct ct_engine *e);
void ct_read_done(struct ct_engine *e, struct ct_read *r, int status);
/* ct_grant.c: the grant of the exposed region holding device bytes [off, off+len), addr that
 * of byte off; GICE_ERR_UNREGISTERED when no exposed region holds them all. Link lock held. */
int ct_grant_find(const struct ct_engine *e, uint64_t off, uint64_t len, fab_mr_info_t *grant);
/* Close every grant (the engine is going away, before its endpoint). */
void ct_grants_revoke_all(struct ct_engine *e);
/* Drop the reads from peer gid that wait for a slot, and forget the reads it made of ours (it
 * failed). */
void ct_reads_cancel(struct ct_engine *e, uint32_t gid);
/* At the target of a rendezvous get over the provider: a GET_GO leaves for p (its read needs our
 * provider's progress), the GET_DONE that ends it arrived, and whether a read may still be
 * under way (CT 0 keeps polling then: ct_tile.c). */
void ct_serve_start(struct ct_engine *e, ct_peer_t *p);
void ct_rx_get_done(struct ct_engine *e, ct_peer_t *p);
int ct_link_serving(struct ct_engine *e, uint64_t now);
/* ct_link_watch.c: failed peers, the link's watchdog */
/* Fail every operation to gid with status and stop talking to it; logs why (when not NULL).
 * Returns the number of operations failed. */
uint32_t ct_peer_fail(struct ct_engine *e, uint32_t gid, int status, const char *why);
/* Fail every operation in the link (a stalled CT 0 under GICE_ON_TIMEOUT=error). */
uint32_t ct_link_fail_all(struct ct_engine *e, int status);
int ct_link_watch(struct ct_engine *e, uint64_t now, ct_event_cb cb, void *arg);
int ct_link_heartbeats(struct ct_engine *e);
void ct_link_bye(struct ct_engine *e);
void ct_link_cancel_all(struct ct_engine *e);

#endif
