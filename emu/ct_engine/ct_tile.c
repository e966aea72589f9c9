/* ct_tile.c: a CT (tile) — its thread's loop (step, drive the link, spin, then sleep on the
 * doorbell), one step of its work (trigger writes, the request queue, due descriptors; waiting
 * kernels run the same step, ct_step.c),
 * the Initiator's first step for each request (check and translate, take a message entry, hand
 * it to the MPG ring). Completion and retirement: ct_complete.c. */
#include "emu/ct_engine/ct_internal.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- messages */

static uint32_t msg_alloc(ct_tile_t *t)
{
	ct_engine_t *e = t->e;
	uint32_t idx = t->free_head;

	if (idx == CT_NIL) {
		/* take everything the link has returned (acquire: see the link's writes to the messages) */
		uint32_t r = atomic_exchange_explicit(&t->ret_head, 0, memory_order_acquire);
		while (r) {
			uint32_t i = r - 1;
			r = e->msgs[i].next;
			e->msgs[i].next = t->free_head;
			t->free_head = i;
		}
		idx = t->free_head;
		if (idx == CT_NIL)
			return CT_NIL;
	}
	t->free_head = e->msgs[idx].next;
	return idx;
}

void ct_engine_set_storage(ct_engine_t *e, ct_storage_fn submit, void *arg)
{
	atomic_store_explicit(&e->sto_arg, arg, memory_order_relaxed);
	/* release: a CT that loads fn sees arg */
	atomic_store_explicit(&e->sto_fn, submit, memory_order_release);
}

uint32_t ct_engine_max_ops(const ct_engine_t *e)
{
	return e->attr.n_cts * (e->tiles[0].rq.mask + 1 + e->tiles[0].rf.mask + 1);
}

int ct_counter_ok(const ct_engine_t *e, uint32_t id)
{
	return id >= e->attr.n_cts && id < e->n_counters;
}

/* ---------------------------------------------------------------- executing requests */

/* Execute one request or fired descriptor. Returns 0, or GICE_ERR_AGAIN when no message entry
 * is free (the caller retries later; nothing was consumed). */
int ct_exec_req(ct_tile_t *t, const ct_req_t *r, uint64_t ticket, uint32_t trig, uint64_t thresh)
{
	ct_engine_t *e = t->e;
	/* a held clock (common.h) may predate a request another thread queued meanwhile: a
	 * pickup is never before its issue */
	uint64_t now = GICE_MAX(gice_now_ns(), r->t_issue);
	uint8_t kind;
	int rc;

	switch (r->op) {
	case CT_OP_NOP:
		ct_complete_counter(e, r->counter, GICE_OK);
		ct_retire(e, t->idx, ticket);
		return 0;
	case CT_OP_CTR_ADD:
	case CT_OP_CTR_SET:
		if (!ct_counter_ok(e, r->sig_id)) {
			gice_error("ct", "counter op on counter %u: valid ids are %u..%u", r->sig_id, e->attr.n_cts,
				   e->n_counters - 1);
			ct_fail_now(e, t, r, ticket, GICE_ERR_INVALID);
			return 0;
		}
		if (r->op == CT_OP_CTR_ADD)
			tm_counter_add(e->attr.tm, r->sig_id, r->value);
		else
			tm_counter_set(e->attr.tm, r->sig_id, r->value);
		ct_complete_counter(e, r->counter, GICE_OK);
		ct_retire(e, t->idx, ticket);
		return 0;
	case CT_OP_FILE_READ:
	case CT_OP_FILE_WRITE:
	case CT_OP_FILE_OPEN:
	case CT_OP_FILE_CLOSE:
	case CT_OP_FILE_SYNC: {
		/* storage path: the device's storage engine carries it out and ends it
		 * (ct_engine_op_done) */
		ct_storage_fn fn = atomic_load_explicit(&e->sto_fn, memory_order_acquire);
		rc = fn ? fn(atomic_load_explicit(&e->sto_arg, memory_order_relaxed), r, t->idx, ticket)
			: GICE_ERR_INVALID;
		if (!fn)
			gice_error("ct", "file operation %u on device %u, which has no file open", r->op, e->attr.gid);
		if (rc)
			ct_fail_now(e, t, r, ticket, rc);
		return 0;
	}
	case CT_OP_PUT: kind = MK_PUT; break;
	case CT_OP_GET: kind = MK_GET; break;
	case CT_OP_AMO_FADD:
	case CT_OP_AMO_CSWAP: kind = MK_AMO; break;
	case CT_OP_FENCE: kind = MK_FENCE; break;
	default:
		gice_error("ct", "ct %u: unknown request op %u", t->idx, r->op);
		ct_fail_now(e, t, r, ticket, GICE_ERR_INVALID);
		return 0;
	}

	if (r->conn >= CT_MAX_CONNS || !e->conns[r->conn].open) {
		gice_error("ct", "request op %u on connection %u that is not open", r->op, r->conn);
		ct_fail_now(e, t, r, ticket, GICE_ERR_INVALID);
		return 0;
	}
	const ct_conn_t *c = &e->conns[r->conn];

	/* Initiator, step 1: translate the local device range through the registration table. */
	uint64_t llen = kind == MK_AMO ? ((r->flags & CT_RF_NO_RESULT) ? 0 : 8) : kind == MK_FENCE ? 0 : r->len;
	if (kind != MK_AMO && r->len > UINT32_MAX) {
		gice_error("ct", "message of %llu bytes exceeds the 4 GiB limit", (unsigned long long)r->len);
		ct_fail_now(e, t, r, ticket, GICE_ERR_INVALID);
		return 0;
	}
	if (llen && (rc = hbm_translate_local(e->attr.hbm, r->src_off, llen, NULL))) {
		gice_error("ct", "%s to device %u: local range [%llu, +%llu) is not registered",
			   kind == MK_PUT ? "put" : kind == MK_GET ? "get" : "atomic", c->peer,
			   (unsigned long long)r->src_off, (unsigned long long)llen);
		ct_fail_now(e, t, r, ticket, rc);
		return 0;
	}
	if ((kind == MK_PUT || kind == MK_GET) && (r->flags & CT_RF_STRONG) && !(r->flags & CT_RF_SIGNAL)) {
		ct_fail_now(e, t, r, ticket, GICE_ERR_INVALID);
		return 0;
	}

	uint32_t idx = msg_alloc(t);
	if (idx == CT_NIL)
		return GICE_ERR_AGAIN;
	ct_msg_t *m = &e->msgs[idx];
	/* one assignment, the rest zero (no memset, then each field again) */
	*m = (ct_msg_t){.req = *r, /* the request itself: the link reads its fields there */
			.kind = (uint8_t)kind, .qos = c->qos, .state = MS_QUEUED, .owner = t->idx,
			.peer = c->peer, .mtu = c->mtu, .next = CT_NIL, .trig = trig, .thresh = thresh,
			.ticket = ticket, .aux = r->op /* AMO: which atomic */, .t_pickup = now};
	if (kind == MK_AMO || kind == MK_FENCE)
		m->req.len = 0; /* no data moves */
	if (!m->req.t_issue)
		m->req.t_issue = now;
	atomic_store_explicit(&t->made, atomic_load_explicit(&t->made, memory_order_relaxed) + 1,
			      memory_order_relaxed); /* before the ring's release below */

	/* Hand it to the MPG: the ring of this CT for the connection's QoS class (release: the
	 * link holder sees the message filled in). */
	ct_ring_t *ring = &t->mpg[m->qos];
	uint32_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
	ring->slot[tail & (CT_MSGS_PER_CT - 1)] = idx;
	atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
	atomic_store_explicit(&e->mpg_new, 1, memory_order_release); /* after the tail: pull_rings */
	/* what the step handed over, for ct_engine_submitted: puts of one packet that may join a
	 * bundle (a larger one leaves alone: ct_xmit), to one peer */
	if (kind != MK_PUT || m->req.len > m->mtu || m->req.len + CT_HDR_BYTES > e->mtu_max / 2 ||
	    (t->pub_peer != CT_NIL && t->pub_peer != m->peer))
		t->pub_peer = CT_PUB_MIXED;
	else if (t->pub_peer == CT_NIL)
		t->pub_peer = m->peer;
	t->pub_bytes += CT_HDR_BYTES + (uint32_t)GICE_MIN(m->req.len, (uint64_t)m->mtu);
	t->pub_puts++;
	/* this step drives the link next (ct_tile_step); if another thread holds it, that holder
	 * comes round again (seq_cst: pairs with its release-then-look, ct_link_progress). Not
	 * when it is set already (a burst's puts that join the cork: no pass clears it), which
	 * spares a locked write per put: the stepping thread's own pass, or its join of a free
	 * link's cork, takes the message anyway (ct_step.c) */
	if (atomic_load_explicit(&e->link_pending, memory_order_relaxed) != 1)
		atomic_store_explicit(&e->link_pending, 1, memory_order_seq_cst);
	return 0;
}

/* ---------------------------------------------------------------- the CT thread */

/* Execute queued requests, at most max; *empty tells whether the queue was found empty.
 * by_proxy: the host proxy runs them (counted in fallback_ops before they can complete). */
static int drain_queue(ct_tile_t *t, int max, int by_proxy, int *empty)
{
	ct_engine_t *e = t->e;
	union {
		ct_req_t r;
		uint8_t b[TM_REQ_MAX_BYTES];
	} u;
	uint64_t ticket;
	int n = 0;

	*empty = 0;
	while (n < max) {
		/* keep tickets within the retirement ring */
		if (t->next_ticket - atomic_load_explicit(&t->rq.cursor, memory_order_acquire) > t->rq.mask)
			break;
		if (t->free_head == CT_NIL && !atomic_load_explicit(&t->ret_head, memory_order_relaxed))
			break; /* no message entry: leave requests queued */
		if (!tm_queue_pop(e->attr.tm, t->idx, u.b, &ticket)) {
			*empty = 1;
			break;
		}
		t->next_ticket = ticket + 1;
		if (gice_unlikely(by_proxy)) /* no atomic add of 0 per request on the device's path */
			ct_stat_add(e, CT_STAT_fallback_ops, 1);
		if (u.r.op == CT_OP_ARM_ || u.r.op == CT_OP_DISARM_)
			ct_control_req(t, &u.r, ticket);
		else if (ct_exec_req(t, &u.r, ticket, TM_NONE, 0) == GICE_ERR_AGAIN)
			gice_error("ct", "ct %u: request dropped for want of a message entry", t->idx); /* not reached */
		n++;
	}
	atomic_store_explicit(&t->consumed, t->next_ticket, memory_order_relaxed);
	return n;
}

/* One pass of a tile's work, by its CT thread or by the host proxy (the caller owns t->own). */
int ct_tile_step(ct_tile_t *t, int by_proxy)
{
	ct_engine_t *e = t->e;
	uint32_t ids[64];
	uint64_t vals[64];
	/* Triggers first, then the queue, then fire: a request pushed before a trigger write
	 * that we have seen is visible in the queue, and goes out before what the trigger
	 * fires (issue order on a connection). So the values fired on are read now, before the
	 * queue (acquire: what their writers pushed before is in it); a write after this read
	 * marks its counter again and fires in the next pass, after what it was issued behind.
	 * (Read at fire time, a write that came after the queue was found empty fired what it
	 * was issued behind: a strong signal beat its put.) If the queue cannot be emptied now,
	 * the triggers wait for the next pass. */
	int empty;
	t->pub_peer = CT_NIL;
	t->pub_bytes = 0;
	t->pub_puts = 0;
	uint32_t n = tm_dirty_take(e->attr.tm, t->idx, ids, GICE_ARRAY_SIZE(ids));
	for (uint32_t i = 0; i < n; i++)
		vals[i] = tm_counter_read(e->attr.tm, ids[i]);
	int work = drain_queue(t, n ? INT32_MAX : 64, by_proxy, &empty);
	t->backlog = !empty;
	for (uint32_t i = 0; i < n; i++) {
		if (empty)
			work += ct_fire_due(t, ids[i], vals[i]) + 1;
		else
			tm_dirty_mark(e->attr.tm, t->idx, ids[i]);
	}
	return work;
}

/* How long an idle CT thread other than CT 0 sleeps on its doorbell before it looks again:
 * it comes round now and then even so, as the watchdog reads that as a heartbeat. */
static uint64_t sleep_ns(const ct_engine_t *e) { return GICE_MIN(100000000ull, e->timeout_ns / 8); }

/* Whether CT 0 may sleep GICE_CT_POLL_US: when the link is idle, and while kernels step it
 * when nothing but the answers of same-host peers is awaited (ct_link_needs_timer). Kernels that
 * step run the link's work themselves, and CT 0 waking beside them only takes their cores: on 2
 * cores it preempts the one copying a rendezvous, its priority being the higher. */
static int ct0_may_sleep_long(ct_engine_t *e)
{
	if (!ct_link_busy(e) && !atomic_load_explicit(&e->attr.ep->held, memory_order_relaxed))
		return 1;
	return atomic_load_explicit(&e->steppers, memory_order_seq_cst) && !ct_link_needs_timer(e, 0);
}

/* Whether a kernel of the device is at its link now: one waits and steps the CTs (steppers),
 * or, when lease_counts, issued a request within the lease (GICE_CT_LEASE_US; it looks at the
 * link at its next one). CT 0's sleep (kernel_nearby) and the CT loop differ only in when an
 * issuing kernel counts. */
static int kernel_at_link(ct_engine_t *e, uint64_t now, int lease_counts)
{
	return atomic_load_explicit(&e->steppers, memory_order_relaxed) ||
	       (lease_counts && tm_doorbell_lease_end(e->attr.tm, 0) > now);
}

/* For CT 0's sleep: a kernel steps (its passes poll and run the timers), or issues while
 * nothing but same-host peers' answers is awaited (its requests take those in; they poll the
 * fabric for nothing else: ct_link_needs_timer). */
static int kernel_nearby(ct_engine_t *e)
{
	return kernel_at_link(e, gice_now_ns(), !ct_link_needs_timer(e, 1));
}

/* CT 0's sleep when it found no work. It is the backstop of the link: messages in flight need
 * acks and retransmission timers; arriving packets ring it when no one polls
 * (tm_doorbell_kick), else it polls every GICE_CT_POLL_US. A long sleep is announced (parked):
 * the last kernel to stop stepping rings CT 0 if it leaves work that needs a timer
 * (ct_engine_stepping). */
static void ct0_sleep(ct_engine_t *e, uint32_t seq)
{
	if (ct0_may_sleep_long(e)) {
		/* announce it, then look again (seq_cst, pairs with ct_engine_stepping): a kernel
		 * that left before is seen here, one that leaves after sees us parked */
		atomic_store_explicit(&e->ct0_parked, 1, memory_order_seq_cst);
		if (ct0_may_sleep_long(e)) {
			ct_link_sleep(e, seq, e->poll_ns);
			atomic_store_explicit(&e->ct0_parked, 0, memory_order_relaxed);
			return;
		}
		atomic_store_explicit(&e->ct0_parked, 0, memory_order_relaxed);
	}
	/* a kernel that steps runs the timers meanwhile, and one that issues looks at what arrives
	 * (its lease: ct_engine_submitted): CT 0 only backs them up */
	ct_link_sleep(e, seq, kernel_nearby(e) ? GICE_MAX(e->rto_min_ns / 4, 20000ull) : 20000);
}

/* A slot to spin in (at most spin_slots of the device's CTs spin at once), or whether this CT
 * holds one already; 0: sleep. */
static int spin_slot_take(ct_tile_t *t)
{
	if (!t->spin_slot)
		t->spin_slot = (uint8_t)gice_spin_get(&t->e->spinning, t->e->spin_slots);
	return t->spin_slot;
}

static void spin_slot_drop(ct_tile_t *t)
{
	if (t->spin_slot) {
		t->spin_slot = 0;
		gice_spin_put(&t->e->spinning);
	}
}

void *ct_thread(void *arg)
{
	ct_tile_t *t = arg;
	ct_engine_t *e = t->e;
	char name[16];
	unsigned spins = 0;

	if (e->attr.host_proxy)
		snprintf(name, sizeof(name), "gice-d%u-proxy", e->attr.index);
	else
		snprintf(name, sizeof(name), "gice-d%u-ct%u", e->attr.index, t->idx);
	pthread_setname_np(pthread_self(), name);
	atomic_store_explicit(&t->tid, (int32_t)gettid(), memory_order_relaxed);
	t->last_work_ns = gice_now_ns();
	atomic_store_explicit(&t->t_start_ns, t->last_work_ns, memory_order_relaxed);
	/* awake: this thread polls the link (every step does), so peers need not ring CT 0 */
	tm_doorbell_awake(e->attr.tm, 0, 1);

	while (!atomic_load_explicit(&e->stop, memory_order_acquire)) {
		uint32_t seq = tm_doorbell_seq(e->attr.tm, t->idx);
		uint64_t now = gice_now_ns();
		if (gice_unlikely(ct_injected_stall(t, now)))
			continue;
		atomic_store_explicit(&t->hb_ns, now, memory_order_relaxed);
		if (!ct_own_try(t)) {
			/* a waiting kernel or the host proxy runs this tile now; not asleep on the
			 * doorbell, so that a kernel's trigger write rings it without a syscall */
			ct_nap_us(50);
			continue;
		}
		int work = ct_tile_step(t, 0), backlog = t->backlog;
		ct_own_drop(t);
		work += ct_link_progress(e);
		if (work) {
			t->last_work_ns = gice_now_ns();
			atomic_store_explicit(&t->busy_ns,
					      atomic_load_explicit(&t->busy_ns, memory_order_relaxed) + t->last_work_ns - now,
					      memory_order_relaxed);
			spins = 0;
		}
		now = gice_now_ns();
		/* Work done: look again at once, unless a kernel is at the link (active): then a pass
		 * per wake-up (it steps, or sends as it issues, and peers ring us at its lease's end).
		 * On a machine whose cores its SM threads fill, a CT's passes take the kernel's core,
		 * and its hold of the link stops the kernel's puts from joining the corked bundle
		 * (each then leaves in a fabric send of its own). An issuing kernel does not count
		 * while this CT's own step left requests queued (backlog: a full message pool or
		 * retirement ring): it steps only the tiles it queues to. None: spin a while, unless
		 * a kernel steps the CTs (docs/concepts.md: a longer rule cost ping-pong latency).
		 * CT 0 polls on while a peer reads our memory (ct_serve_start), even when CTs do not
		 * spin, unless a kernel steps. */
		int serving = t->idx == 0 && ct_link_serving(e, now) &&
			      !atomic_load_explicit(&e->steppers, memory_order_relaxed);
		int active = !serving && kernel_at_link(e, now, !backlog);
		if (work && !active)
			continue;
		if (!work && (serving || (!atomic_load_explicit(&e->steppers, memory_order_relaxed) &&
					  now - t->last_work_ns < e->spin_ns && spin_slot_take(t)))) {
			/* Back off while idle: polling the fabric takes the provider's locks, which the
			 * peer's sender needs too (shm); and two cores may run four ranks, so let other
			 * threads in now and then. */
			if ((++spins & 3) == 0) {
				/* the kernel that will issue the next request may share this core */
				sched_yield();
			} else {
				for (unsigned i = 0, lim = 1u << GICE_MIN(spins, 1u); i < lim; i++)
					gice_cpu_relax();
			}
			continue;
		}
		/* Sleep on the doorbell: no longer awake, then one more look (a packet that arrived
		 * before a sender saw us asleep is found here; one after rings us). */
		spin_slot_drop(t);
		tm_doorbell_awake(e->attr.tm, 0, -1);
		if (!ct_own_try(t)) {
			work = 1; /* someone else steps it: look again soon */
		} else {
			work = ct_tile_step(t, 0);
			backlog = t->backlog;
			ct_own_drop(t);
			work += ct_link_progress(e);
			if (active && !backlog) /* it comes back to the link; peers ring us at its
						 * lease's end */
				work = 0;
		}
		if (!work && t->idx == 0)
			ct0_sleep(e, seq);
		else if (!work)
			tm_doorbell_sleep(e->attr.tm, t->idx, seq, sleep_ns(e));
		tm_doorbell_awake(e->attr.tm, 0, 1);
		spins = 0;
	}
	spin_slot_drop(t);
	tm_doorbell_awake(e->attr.tm, 0, -1);
	return NULL;
}
