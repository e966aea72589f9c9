/* ct_watch.c: the engine's watchdog hooks — stalled CTs found by their heartbeats, and what
 * GICE_ON_TIMEOUT does about them (fail what they hold, or let the host proxy thread run their
 * step: fallback) — and the fault injection that tests them (stall a CT, hang the device). The
 * link's own watchdog (peers) is in ct_link_watch.c. */
#include "emu/ct_engine/ct_internal.h"

#include <stdio.h>

/* Fault injection: sit out a scheduled stall (without owning the tile, as a hung tile would
 * leave its state). Returns 1 while stalled. */
int ct_injected_stall(ct_tile_t *t, uint64_t now)
{
	ct_engine_t *e = t->e;

	uint64_t hang = atomic_load_explicit(&e->hang_at_ns, memory_order_relaxed);
	if (hang && now >= hang) {
		ct_nap_us(1000);
		return 1;
	}
	uint64_t from = atomic_load_explicit(&t->stall_from, memory_order_acquire);
	if (!from || now < from)
		return 0;
	uint64_t until = atomic_load_explicit(&t->stall_until, memory_order_relaxed);
	if (now >= until) {
		gice_info("fault", "device %u CT %u: injected stall over", e->attr.gid, t->idx);
		atomic_compare_exchange_strong(&t->stall_from, &from, 0); /* unless a new one was set */
		return 0;
	}
	ct_nap_us(GICE_MIN((until - now) / 1000 + 1, 1000ull));
	return 1;
}

int ct_engine_fault_stall(ct_engine_t *e, uint32_t ct, uint64_t at_ns, uint64_t dur_ns)
{
	if (ct >= e->attr.n_cts) {
		gice_error("fault", "stall_ct=%u: device %u has CTs 0..%u", ct, e->attr.gid, e->attr.n_cts - 1);
		return GICE_ERR_INVALID;
	}
	ct_tile_t *t = &e->tiles[ct];
	atomic_store_explicit(&t->stall_from, 0, memory_order_relaxed);
	atomic_store_explicit(&t->stall_until, dur_ns == UINT64_MAX ? UINT64_MAX : at_ns + dur_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&t->stall_from, GICE_MAX(at_ns, 1ull), memory_order_release);
	return GICE_OK;
}

void ct_engine_fault_hang(ct_engine_t *e, uint64_t at_ns)
{
	atomic_store(&e->hang_at_ns, GICE_MAX(at_ns, 1ull));
}

/* Fault injection across machines: a rank asks another to kill or hang itself (gice_faults_set
 * of a rank on another machine, where no signal reaches), with a FAULT packet. Only the job's
 * MAC makes it trusted: without GICE_CT_AUTH neither end takes part. */
static const char *fault_action_name(uint64_t a) { return a == CT_FAULT_KILL ? "kill" : "hang"; }

int ct_engine_fault_request(ct_engine_t *e, uint32_t gid, int kill, uint64_t delay_ns)
{
	uint32_t action = kill ? CT_FAULT_KILL : CT_FAULT_HANG;
	int rc;

	if (!e->auth) {
		gice_error("fault", "device %u: %s_rank of device %u's rank: a request to another machine needs "
				    "GICE_CT_AUTH=1 (without the job's MAC its receiver could not trust it)",
			   e->attr.gid, fault_action_name(action), gid);
		return GICE_ERR_UNSUPPORTED;
	}
	if (gid >= e->max_peers || gid == e->attr.gid)
		return GICE_ERR_INVALID;
	ct_link_lock(e);
	if (!e->peers[gid].present)
		rc = GICE_ERR_INVALID;
	else if (e->peers[gid].dead)
		rc = GICE_ERR_PEER_DEAD;
	else
		rc = ct_send_ctrl(e, gid, CT_PKT_FAULT, 0, action, delay_ns);
	ct_link_unlock(e); /* the packet leaves now (ct_bundle_flush) */
	if (rc)
		gice_error("fault", "device %u: %s request to device %u: %s", e->attr.gid, fault_action_name(action), gid,
			   gice_status_name(rc));
	return rc;
}

void ct_rx_fault(ct_engine_t *e, const ct_hdr_t *h)
{
	if (!e->auth || !e->attr.on_fault) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_auth_bad, 1);
		if (CT_LOG_DUE(n))
			gice_warn("fault", "device %u: refused a %s request from device %u: %s (%llu so far)", e->attr.gid,
				  fault_action_name(h->value), h->src_gid,
				  e->auth ? "this device takes none" : "GICE_CT_AUTH=0: it cannot be trusted",
				  (unsigned long long)n + 1);
		return;
	}
	gice_warn("fault", "device %u: device %u asks this rank to %s itself in %llu ms (FAULT request)", e->attr.gid,
		  h->src_gid, fault_action_name(h->value), (unsigned long long)(h->aux / 1000000));
	e->attr.on_fault(e->attr.on_fault_arg, h->src_gid, h->value == CT_FAULT_KILL, h->aux);
}

/* The host proxy of GICE_ON_TIMEOUT=fallback: runs the step of every tile the watchdog found
 * stalled (serialized with the tile's own thread by t->own) until the engine stops. */
static void *proxy_thread(void *arg)
{
	ct_engine_t *e = arg;
	char name[16];

	snprintf(name, sizeof(name), "gice-d%u-proxy", e->attr.index);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load_explicit(&e->stop, memory_order_acquire)) {
		int work = 0;
		for (uint32_t c = 0; c < e->attr.n_cts; c++) {
			ct_tile_t *t = &e->tiles[c];
			if (!atomic_load_explicit(&t->proxied, memory_order_acquire) || !ct_own_try(t))
				continue;
			work += ct_tile_step(t, 1);
			ct_own_drop(t);
			work += ct_link_progress(e);
		}
		if (!work)
			ct_nap_us(50);
	}
	return NULL;
}

/* The first request a stalled tile failed, for the diagnostic. */
struct first_failed {
	int valid;
	ct_req_t r;
	uint64_t counter_value; /* its completion counter before it failed */
};

static const char *req_op_name(uint8_t op)
{
	static const char *const names[] = {"nop", "put", "get", "fetch-add", "compare-swap", "counter add",
					    "counter set", "fence", "arm", "disarm", "file read", "file write",
					    "file open", "file close", "file sync"};
	return op < GICE_ARRAY_SIZE(names) ? names[op] : "request";
}

/* Fail the requests queued for a stalled tile (the caller owns it); the first into *first.
 * Returns how many. */
static uint32_t fail_queued(ct_tile_t *t, int status, struct first_failed *first)
{
	ct_engine_t *e = t->e;
	union {
		ct_req_t r;
		uint8_t b[TM_REQ_MAX_BYTES];
	} u;
	uint64_t ticket;
	uint32_t n = 0;

	while (tm_queue_pop(e->attr.tm, t->idx, u.b, &ticket)) {
		t->next_ticket = ticket + 1;
		if (u.r.op == CT_OP_ARM_ || u.r.op == CT_OP_DISARM_) {
			ct_control_req(t, &u.r, ticket);
			continue;
		}
		if (first && !first->valid) {
			first->valid = 1;
			first->r = u.r;
			first->counter_value = u.r.counter != TM_NONE ? tm_counter_read(e->attr.tm, u.r.counter) : 0;
		}
		ct_fail_now(e, t, &u.r, ticket, status);
		n++;
	}
	atomic_store_explicit(&t->consumed, t->next_ticket, memory_order_relaxed);
	return n;
}

/* Was t's thread starved rather than stalled: runnable but hardly on a CPU since the last look
 * (/proc's schedstat: time run, time waited on a run queue)? A stalled thread sleeps or runs
 * without progress; a starved one waits for a core that a loaded machine does not give it,
 * and would be wrongly called stalled. The first look of a stale spell only takes the sample
 * (1: look again), so a stall is reported one watchdog period later than its heartbeat says.
 * 0 when the counters cannot be read (judged on the heartbeat alone, as before). */
static int thread_starved(ct_tile_t *t, uint64_t now)
{
	char path[64], buf[96];
	unsigned long long run = 0, wait = 0;
	int32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
	FILE *f;

	if (tid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	if (!(f = fopen(path, "r")))
		return 0;
	int ok = fgets(buf, sizeof(buf), f) && sscanf(buf, "%llu %llu", &run, &wait) == 2;
	fclose(f);
	if (!ok)
		return 0;
	int first = !t->sched.valid;
	uint64_t dt = now - t->sched.at_ns, run_d = run - t->sched.run_ns, wait_d = wait - t->sched.wait_ns;
	t->sched.run_ns = run;
	t->sched.wait_ns = wait;
	t->sched.at_ns = now;
	t->sched.valid = 1;
	return first || (run_d < dt / 20 && wait_d > dt / 2);
}

int ct_engine_watch(ct_engine_t *e, int on_timeout, ct_event_cb cb, void *arg)
{
	uint64_t now = gice_now_ns(), stall_ns = e->timeout_ns / 2;
	int events = 0;

	uint64_t hang = atomic_load_explicit(&e->hang_at_ns, memory_order_relaxed);
	if (hang && now >= hang)
		return 0; /* a hung device does nothing, heartbeats included */
	for (uint32_t c = 0; c < e->attr.n_cts; c++) {
		ct_tile_t *t = &e->tiles[c];
		uint64_t hb = atomic_load_explicit(&t->hb_ns, memory_order_relaxed);
		uint64_t queued = tm_queue_prod(e->attr.tm, c) - atomic_load_explicit(&t->consumed, memory_order_relaxed);
		/* CT 0 polls the link at least every GICE_CT_POLL_US even when idle: packets may be
		 * arriving that only it would see */
		int pending = queued || (c == 0 && (ct_link_busy(e) || e->poll_ns < stall_ns));
		int stale = now > hb && now - hb > stall_ns;
		/* CT 0 stuck inside a link pass that does not end (a call into the provider that
		 * does not return) is the link's to judge: ct_link_watch names what it waits on */
		if (c == 0 && stale && ct_link_held_stale(e, now))
			continue;

		if (t->stalled && !stale) {
			t->stalled = 0;
			atomic_store_explicit(&t->proxied, 0, memory_order_release);
			gice_warn("watchdog", "device %u: CT %u is making progress again", e->attr.gid, c);
			continue;
		}
		if (!stale)
			t->sched.valid = 0; /* a stale spell starts its own samples */
		if (!stale || !pending)
			continue;
		if (!t->stalled && thread_starved(t, now))
			continue;
		if (t->stalled) {
			/* still stalled under error: what was queued since fails too */
			if (on_timeout != CT_ON_TIMEOUT_FALLBACK && ct_own_try(t)) {
				fail_queued(t, GICE_ERR_CT_STALLED, NULL);
				ct_own_drop(t);
				if (c == 0 && ct_link_trylock(e)) {
					ct_link_fail_all(e, GICE_ERR_CT_STALLED);
					ct_link_unlock_watch(e);
				}
			}
			continue;
		}
		t->stalled = 1;
		ct_stat_add(e, CT_STAT_ct_stalls, 1);
		ct_event_t ev = {.status = GICE_ERR_CT_STALLED, .device_gid = e->attr.gid, .peer_gid = UINT32_MAX,
				 .ct = c, .waited_ns = now - hb, .trigger = UINT32_MAX, .counter = UINT32_MAX};
		int len = snprintf(ev.text, sizeof(ev.text),
				   "device %u: CT %u stalled: no progress for %llu ms (timeout %llu ms) with %llu request(s) queued%s",
				   e->attr.gid, c, (unsigned long long)(ev.waited_ns / 1000000),
				   (unsigned long long)(e->timeout_ns / 1000000), (unsigned long long)queued,
				   c == 0 && ct_link_busy(e) ? " and messages on its link" : "");
		if (on_timeout == CT_ON_TIMEOUT_FALLBACK) {
			ev.fallback = 1;
			ev.n_ops = (uint32_t)queued;
			atomic_store_explicit(&t->proxied, 1, memory_order_release);
			if (!atomic_exchange(&e->proxy_started, 1) && pthread_create(&e->proxy, NULL, proxy_thread, e)) {
				atomic_store(&e->proxy_started, 0);
				ev.fallback = 0;
			}
			snprintf(ev.text + len, sizeof(ev.text) - (size_t)len, "; %s",
				 ev.fallback ? "GICE_ON_TIMEOUT=fallback: the host proxy thread issues its operations"
					     : "the host proxy thread could not start");
		} else if (ct_own_try(t)) {
			struct first_failed ff = {0};
			ev.n_ops = fail_queued(t, GICE_ERR_CT_STALLED, &ff);
			ct_own_drop(t);
			if (c == 0 && ct_link_trylock(e)) {
				ev.n_ops += ct_link_fail_all(e, GICE_ERR_CT_STALLED);
				ct_link_unlock_watch(e);
			}
			len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len, "; %u operation(s) failed with %s",
					ev.n_ops, gice_status_name(GICE_ERR_CT_STALLED));
			if (ff.valid && len < (int)sizeof(ev.text)) {
				/* name the oldest: what it was and which counter its waiter watches */
				ev.op_name = req_op_name(ff.r.op);
				ev.bytes = ff.r.len;
				ev.counter = ff.r.counter;
				ev.counter_value = ff.counter_value;
				len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len, "; oldest: %s of %llu B on connection %u",
						ev.op_name, (unsigned long long)ff.r.len, ff.r.conn);
				if (ff.r.counter != TM_NONE && len < (int)sizeof(ev.text))
					snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
						 ", completion counter %u expected %llu found %llu", ff.r.counter,
						 (unsigned long long)ff.counter_value + 1, (unsigned long long)ff.counter_value);
			}
		} else {
			snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
				 "; it holds its queue, nothing could be failed");
		}
		gice_error("watchdog", "%s", ev.text);
		if (cb)
			cb(&ev, arg);
		events++;
	}
	return events + ct_link_watch(e, now, cb, arg);
}
