/* ct_step.c: progress by the device's own kernels. A kernel (an SM thread) that waits on a
 * counter, or that has just queued a request or written a trigger, runs the step of its
 * device's CTs when it can take them (try-acquire of each tile's ownership flag and of the
 * link, never blocking), so a ping-pong needs no thread hand-off: the request goes from the
 * queue in trigger memory onto the link, and the answer from the link into the counter, on the
 * waiting SM thread. It reads and writes exactly what the CT thread would (trigger memory,
 * device memory, the link). The CT threads stay the backstop that makes progress when no kernel
 * waits; host threads never step. */
#include "emu/ct_engine/ct_internal.h"

/* A device hung by fault injection does nothing, whoever steps it. */
static int hung(ct_engine_t *e)
{
	uint64_t hang = atomic_load_explicit(&e->hang_at_ns, memory_order_relaxed);

	return gice_unlikely(hang != 0) && gice_now_ns() >= hang;
}

/* Step every tile not held elsewhere, then make link pass pass: ct_link_progress_waiting for a
 * kernel's wait (its riding ACKs left for the next pass), ct_link_look for its last step before
 * it stops stepping, ct_link_progress for a stream thread's. */
static int step(ct_engine_t *e, int (*pass)(ct_engine_t *), uint32_t ring)
{
	uint64_t now = gice_coarse_ns(); /* a heartbeat for the watchdog */
	int work = 0;

	if (hung(e))
		return 0;
	for (uint32_t c = 0; c < e->attr.n_cts; c++) {
		ct_tile_t *t = &e->tiles[c];
		if (!ct_own_try(t)) {
			/* its thread (or another waiter) is on it; it may be past its look at what we
			 * marked: ring it */
			if (ring & (1u << c))
				tm_doorbell_ring(e->attr.tm, c);
			continue;
		}
		work += ct_tile_step(t, 0);
		ct_own_drop(t);
		/* the tile moved: the watchdog must not call it stalled (its thread may be) */
		atomic_store_explicit(&t->hb_ns, now, memory_order_relaxed);
	}
	return work + pass(e); /* once for all of them */
}

int ct_engine_step(ct_engine_t *e) { return step(e, ct_link_progress_waiting, 0); }

int ct_engine_step_ring(ct_engine_t *e, uint32_t ring)
{
	if (hung(e)) { /* it steps nothing: the marks wait for the ring as they would */
		for (uint32_t c = 0; c < e->attr.n_cts; c++)
			if (ring & (1u << c))
				tm_doorbell_ring(e->attr.tm, c);
		return 0;
	}
	return step(e, ct_link_progress, ring);
}

/* Whether what a step just handed to the MPG (ct_tile_t.pub_peer, pub_bytes) are small puts to
 * the peer whose bundle the link left corked, with room for them there: a pass now would only
 * add them to that bundle, and the pass that sends it (the next full one: a wait's, CT 0's, or
 * that of the kernel's next request that does not join) takes them from the rings too. A burst
 * of puts then pays a pass per bundle, not per put. The link must be free: its holder's last
 * pass left the cork as read here (acquire: its release of the lock); a holder in a pass comes
 * round for them anyway (link_pending). Returns 0 (not joined), JOINED, or JOINED_PUSH: joined,
 * and the puts joined since the cork was published reached CT_PUSH_PUTS with these. */
enum { JOINED = 1, JOINED_PUSH };

static int join_corked(ct_engine_t *e, uint32_t peer, uint32_t need, uint32_t puts)
{
	uint64_t c;

	if (peer >= CT_PUB_MIXED || atomic_load_explicit(&e->link_lock, memory_order_acquire) ||
	    atomic_load_explicit(&e->cork_gid, memory_order_relaxed) != peer)
		return 0;
	c = atomic_load_explicit(&e->cork, memory_order_relaxed);
	do {
		if ((uint32_t)c < need)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&e->cork, &c, c - need + ((uint64_t)puts << 32),
							memory_order_relaxed, memory_order_relaxed));
	uint32_t before = (uint32_t)(c >> 32);
	return before < CT_PUSH_PUTS && before + puts >= CT_PUSH_PUTS ? JOINED_PUSH : JOINED;
}

/* A kernel's request, stepped by it or not, onto the link. */
static void onto_link(ct_engine_t *e, int stepped)
{
	/* A kernel that issues comes back here soon, and looks at the link each time a peer
	 * announced something (below): peers' kicks meanwhile need not wake CT 0 (the lease; they
	 * nudge at its end). On 2 cores such a wake-up took a spinning SM thread's core, about once
	 * per window of gice-bench rate. The held clock: the request's own stamp (api_push_req). */
	if (e->lease_ns)
		tm_doorbell_lease(e->attr.tm, 0, gice_now_ns(), e->lease_ns);
	/* What arrives is taken in only when a peer announced it (an ACK that frees credits, a put
	 * to this device) and no thread of the device is awake to (CT 0 that a tcp socket woke, a
	 * waiting kernel): a burst of puts pays no fabric poll per put, and over tcp no syscall
	 * that CT 0 makes on the other core anyway. */
	if (!ct_link_nothing_announced(e) && !tm_doorbell_awake_n(e->attr.tm, 0))
		ct_link_look(e);
	else if (stepped)
		ct_link_send(e);
}

void ct_engine_submitted(ct_engine_t *e, uint32_t ct)
{
	ct_tile_t *t = &e->tiles[ct];

	if (hung(e)) {
		tm_doorbell_ring(e->attr.tm, ct); /* its request waits as it would for the CT */
		return;
	}
	int stepped = ct_own_try(t);
	uint32_t pub_peer = CT_NIL, pub_bytes = 0, pub_puts = 0;
	if (stepped) {
		ct_tile_step(t, 0);
		pub_peer = t->pub_peer; /* the tile's own: read while it is ours */
		pub_bytes = t->pub_bytes;
		pub_puts = t->pub_puts;
		ct_own_drop(t);
		/* the request's stamp when held (api_push_req): no clock read per put */
		atomic_store_explicit(&t->hb_ns, gice_clock_held ? gice_clock_held : gice_coarse_ns(),
				      memory_order_relaxed);
	}
	/* Puts that join the corked bundle are done: the kernel is issuing a burst, and the bundle
	 * leaves whole when it is full or the kernel stops (as TCP_CORK; MSG_MORE). They neither
	 * look at what arrived nor renew the lease (onto_link), so an ACK arriving mid-burst does
	 * not send the bundle off in pieces, each paying a pass, a send and an ACK back
	 * (gice-bench rate, 8 B: 2.1 -> 3.1 M puts/s); what else arrives waits for the burst's end
	 * or the lease's (GICE_CT_LEASE_US), no longer. */
	int joined = stepped ? join_corked(e, pub_peer, pub_bytes, pub_puts) : 0;
	if (!joined) {
		onto_link(e, stepped);
	} else if (joined == JOINED_PUSH) {
		/* CT_PUSH_PUTS of the burst have joined: they go now, and the rest of the burst
		 * joins the cork, kept for it. The peer takes these in while the kernel issues the
		 * next ones; the push renews the lease, as onto_link does, so that the ACKs coming
		 * back meanwhile do not wake CT 0 on a core the kernels need. */
		if (e->lease_ns)
			tm_doorbell_lease(e->attr.tm, 0, gice_now_ns(), e->lease_ns);
		ct_link_push(e);
	}
	/* all taken (a full message pool or retirement window leaves requests queued) */
	if (stepped && atomic_load_explicit(&t->consumed, memory_order_relaxed) == tm_queue_prod(e->attr.tm, ct))
		return;
	/* its owner may be past its look at the queue: ring (no syscall unless it sleeps) */
	tm_doorbell_ring(e->attr.tm, ct);
}

void ct_engine_stepping(ct_engine_t *e, int on)
{
	if (on) {
		atomic_fetch_add_explicit(&e->steppers, 1, memory_order_relaxed);
		tm_doorbell_awake(e->attr.tm, 0, 1);
		return;
	}
	tm_doorbell_awake(e->attr.tm, 0, -1);
	uint32_t left = atomic_fetch_sub_explicit(&e->steppers, 1, memory_order_seq_cst) - 1;
	/* One more look: a packet that arrived before a sender saw us leave is found now; one
	 * after rings CT 0. Not needed when every packet same-host peers counted in their kicks
	 * has been taken in and no peer is elsewhere (its packets are not counted): a packet
	 * counted after our subtraction finds no one awake and rings (tm_doorbell_kick). That
	 * spares a ping-pong's waiter a pass (a poll, a syscall on socket providers) between the
	 * answer and its next request. The ACKs it owes wait for the next pass: the kernel's next
	 * request may carry them (ct_link_look). */
	if (!ct_link_nothing_announced(e))
		step(e, ct_link_look, 0);
	if (!left)
		ct_link_settle(e);
	/* The last to leave hands the link back to CT 0, which may have parked beside us
	 * (ct_tile.c): ring it if what we leave needs its timer (seq_cst: after our decrement) */
	if (!left && atomic_load_explicit(&e->ct0_parked, memory_order_seq_cst) && ct_link_needs_timer(e, 0))
		tm_doorbell_ring(e->attr.tm, 0);
}

/* What the block's last wait left: an ACK it took in (ct_ack_in_defer), the ACKs it owes (its
 * last pass ended at a drain: ct_link.c). */
void ct_engine_block_end(ct_engine_t *e)
{
	if ((atomic_load_explicit(&e->ackin_gid, memory_order_relaxed) != CT_NIL ||
	     atomic_load_explicit(&e->acks_delayed, memory_order_relaxed)) && !hung(e))
		ct_link_progress(e);
}

uint64_t ct_engine_spin_ns(const ct_engine_t *e) { return e->spin_cfg_ns; }
