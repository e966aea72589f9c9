/* tm_counter.c: the counters of a trigger memory region (see triggermem.h): id allocation,
 * the watch bits that tie a counter to the CTs that arm on it, writes, reads and waits; and
 * the device's health (abort status, progress), which every wait checks.
 *
 * Futex protocol (the futex is shared, so it works across processes):
 *  - counter: the writer changes value/fail, then bumps seq, then reads waiters; a waiter
 *    increments waiters, then reads seq, then checks value/fail, then futex-waits on that seq.
 *    Both pairs are seq_cst, so either the writer sees the waiter (and wakes it) or the waiter's
 *    seq read sees the bump (and futex_wait returns at once, or the check sees the new value).
 */
#include "emu/triggermem/tm_internal.h"

#include <limits.h>
#include <sched.h>

static inline struct tm_counter *ctr(const tm_region_t *r, uint32_t id)
{
	assert(id < r->layout.n_counters);
	return &r->counters[id];
}

/* ---- counter ids (set-up path) ---- */

int tm_counter_alloc(tm_region_t *r, uint32_t *id)
{
	uint32_t n_words = r->layout.n_counters / 64;

	if (!r->owner) {
		gice_error("tm", "counter ids are allocated by the process that created the region");
		return GICE_ERR_UNSUPPORTED;
	}
	pthread_mutex_lock(&r->lock);
	for (uint32_t w = 0; w < n_words; w++) {
		uint64_t freebits = ~atomic_load_explicit(&r->alloc_bits[w], memory_order_relaxed);
		if (!freebits)
			continue;
		uint32_t b = (uint32_t)__builtin_ctzll(freebits);
		/* release: pairs with the acquire in tm_counter_allocated */
		atomic_fetch_or_explicit(&r->alloc_bits[w], 1ull << b, memory_order_release);
		r->n_alloc++;
		pthread_mutex_unlock(&r->lock);
		*id = w * 64 + b;
		return GICE_OK;
	}
	pthread_mutex_unlock(&r->lock);
	gice_error("tm", "all %u counters are in use (%u reserved for CT queues)", r->layout.n_counters,
		   r->layout.n_cts);
	return GICE_ERR_NO_MEMORY;
}

int tm_counter_alloc_at(tm_region_t *r, uint32_t id)
{
	int rc = GICE_OK;

	if (!r->owner) {
		gice_error("tm", "counter ids are allocated by the process that created the region");
		return GICE_ERR_UNSUPPORTED;
	}
	if (id < r->layout.n_cts || id >= r->layout.n_counters) {
		gice_error("tm", "allocation of counter %u: reserved or out of range (n_cts %u, n_counters %u)", id,
			   r->layout.n_cts, r->layout.n_counters);
		return GICE_ERR_INVALID;
	}
	pthread_mutex_lock(&r->lock);
	if (atomic_load_explicit(&r->alloc_bits[id / 64], memory_order_relaxed) & (1ull << (id % 64))) {
		rc = GICE_ERR_BUSY;
	} else {
		/* release: pairs with the acquire in tm_counter_allocated */
		atomic_fetch_or_explicit(&r->alloc_bits[id / 64], 1ull << (id % 64), memory_order_release);
		r->n_alloc++;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int tm_counter_free(tm_region_t *r, uint32_t id)
{
	int rc = GICE_OK;

	if (!r->owner) {
		gice_error("tm", "counter ids are freed by the process that created the region");
		return GICE_ERR_UNSUPPORTED;
	}
	if (id < r->layout.n_cts || id >= r->layout.n_counters) {
		gice_error("tm", "free of counter %u: reserved or out of range (n_cts %u, n_counters %u)",
			   id, r->layout.n_cts, r->layout.n_counters);
		return GICE_ERR_INVALID;
	}
	pthread_mutex_lock(&r->lock);
	if (!(atomic_load_explicit(&r->alloc_bits[id / 64], memory_order_relaxed) & (1ull << (id % 64)))) {
		rc = GICE_ERR_INVALID;
	} else {
		atomic_fetch_and_explicit(&r->alloc_bits[id / 64], ~(1ull << (id % 64)), memory_order_release);
		r->n_alloc--;
	}
	pthread_mutex_unlock(&r->lock);
	if (rc)
		gice_error("tm", "free of counter %u: not allocated", id);
	return rc;
}

int tm_counter_allocated(const tm_region_t *r, uint32_t id)
{
	if (!r->owner)
		return GICE_ERR_UNSUPPORTED;
	if (id >= r->layout.n_counters)
		return 0;
	/* acquire: pairs with the release of tm_counter_alloc / tm_counter_free */
	return (int)((atomic_load_explicit(&r->alloc_bits[id / 64], memory_order_acquire) >> (id % 64)) & 1);
}

void tm_counter_watch(tm_region_t *r, uint32_t id, uint32_t ct, int on)
{
	struct tm_counter *c = ctr(r, id);

	assert(ct < r->layout.n_cts);
	/* seq_cst: pairs with the writer's seq_cst value RMW + watch load: after this call either
	 * the writer sees the bit, or the arming code's later read of the value sees the write. */
	if (on)
		atomic_fetch_or_explicit(&c->watch, 1u << ct, memory_order_seq_cst);
	else
		atomic_fetch_and_explicit(&c->watch, ~(1u << ct), memory_order_seq_cst);
}

/* ---- counter writes ---- */

/* Common tail of every write: wake waiters, notify watching CTs. */
/* Stamp before the change: a reader that sees the new value (acquire) also sees its time. */
static inline void counter_stamp(struct tm_counter *c)
{
	atomic_store_explicit(&c->ts_ns, gice_now_ns(), memory_order_relaxed);
}

/* Wake the counter's waiters and mark it dirty for the CTs that watch it; ring: ring their
 * doorbells too (else the caller steps them itself, or rings). Returns the CTs watching. */
static inline uint32_t counter_notify(tm_region_t *r, uint32_t id, struct tm_counter *c, int ring)
{
	/* seq_cst RMW: releases the value/fail change to waiters that read seq (acquire) and is
	 * ordered before the waiters load (Dekker pair with tm_counter_wait's registration). */
	atomic_fetch_add_explicit(&c->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->waiters, memory_order_seq_cst))
		gice_futex_wake(&c->seq, INT_MAX);
	/* seq_cst: after the value change, pairs with tm_counter_watch (see there). */
	uint32_t m = atomic_load_explicit(&c->watch, memory_order_seq_cst), watching = m;
	while (gice_unlikely(m)) {
		uint32_t ct = (uint32_t)__builtin_ctz(m);
		m &= m - 1;
		if (ring)
			tm_dirty_mark(r, ct, id);
		else
			tm_dirty_set(r, ct, id);
	}
	return watching;
}

void tm_counter_add(tm_region_t *r, uint32_t id, uint64_t v)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_fetch_add_explicit(&c->value, v, memory_order_seq_cst);
	counter_notify(r, id, c, 1);
}

uint32_t tm_counter_write_quiet(tm_region_t *r, uint32_t id, uint64_t v, int add)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	if (add)
		atomic_fetch_add_explicit(&c->value, v, memory_order_seq_cst);
	else
		atomic_store_explicit(&c->value, v, memory_order_seq_cst);
	return counter_notify(r, id, c, 0);
}

void tm_counter_set(tm_region_t *r, uint32_t id, uint64_t v)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_store_explicit(&c->value, v, memory_order_seq_cst);
	counter_notify(r, id, c, 1);
}

void tm_counter_fail(tm_region_t *r, uint32_t id, int status)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_store_explicit(&c->status, status, memory_order_relaxed);
	/* seq_cst (so release): a reader that sees the new failure count sees the status. */
	atomic_fetch_add_explicit(&c->fail, 1, memory_order_seq_cst);
	counter_notify(r, id, c, 1);
}

void tm_counter_reset(tm_region_t *r, uint32_t id)
{
	struct tm_counter *c = ctr(r, id);

	atomic_store_explicit(&c->value, 0, memory_order_relaxed);
	atomic_store_explicit(&c->status, GICE_OK, memory_order_relaxed);
	atomic_store_explicit(&c->fail, 0, memory_order_relaxed);
	atomic_store_explicit(&c->ts_ns, gice_now_ns(), memory_order_relaxed);
	/* release the zeroes to anyone reading seq; wake sleepers so they re-check */
	atomic_fetch_add_explicit(&c->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->waiters, memory_order_seq_cst))
		gice_futex_wake(&c->seq, INT_MAX);
}

/* ---- counter reads and waits ---- */

uint64_t tm_counter_read(const tm_region_t *r, uint32_t id)
{
	/* acquire: data written before the counter write is visible after the read */
	return atomic_load_explicit(&ctr(r, id)->value, memory_order_acquire);
}

void tm_counter_get(const tm_region_t *r, uint32_t id, tm_counter_state_t *st)
{
	struct tm_counter *c = ctr(r, id);

	/* fail (acquire) before status: pairs with tm_counter_fail's status-then-fail order */
	st->fail = atomic_load_explicit(&c->fail, memory_order_acquire);
	st->status = atomic_load_explicit(&c->status, memory_order_relaxed);
	st->value = atomic_load_explicit(&c->value, memory_order_acquire);
	st->ts_ns = atomic_load_explicit(&c->ts_ns, memory_order_relaxed);
	if (!st->fail)
		st->status = GICE_OK;
}

int tm_cmp_ok(uint64_t value, tm_cmp_t cmp, uint64_t v)
{
	int64_t d = (int64_t)(value - v);

	switch (cmp) {
	case TM_CMP_EQ: return value == v;
	case TM_CMP_NE: return value != v;
	case TM_CMP_GT: return d > 0;
	case TM_CMP_GE: return d >= 0;
	case TM_CMP_LT: return d < 0;
	case TM_CMP_LE: return d <= 0;
	}
	return 0;
}

/* One check: 1 done (rc set), 0 keep waiting. The counter's own failure, then the condition
 * (what the wait is for has happened), then the device's abort. */
static inline int wait_check(const tm_region_t *r, struct tm_counter *c, tm_cmp_t cmp, uint64_t v,
			     uint64_t *seen, int *rc)
{
	if (gice_unlikely(atomic_load_explicit(&c->fail, memory_order_acquire))) {
		int st = atomic_load_explicit(&c->status, memory_order_relaxed);
		*seen = atomic_load_explicit(&c->value, memory_order_acquire);
		/* a failure recorded with a non-error status still must not read as success */
		*rc = st < 0 ? st : GICE_ERR_IO;
		return 1;
	}
	*seen = atomic_load_explicit(&c->value, memory_order_acquire);
	if (tm_cmp_ok(*seen, cmp, v)) {
		*rc = GICE_OK;
		return 1;
	}
	if (gice_unlikely((*rc = atomic_load_explicit(&r->state->status, memory_order_acquire)) != GICE_OK))
		return 1;
	return 0;
}

/* Idle wait: has anything happened since `since`? The counter changed (seq), or the device
 * noted progress (tm_progress). */
static int wait_progressed(const tm_region_t *r, struct tm_counter *c, uint32_t *seq, uint64_t since)
{
	uint32_t s = atomic_load_explicit(&c->seq, memory_order_acquire);
	int moved = s != *seq;

	*seq = s;
	return moved || atomic_load_explicit(&r->state->progress_ns, memory_order_relaxed) > since;
}

/* Yields in a row that found no other thread to run (this thread's, across its waits). */
static __thread uint32_t idle_yields;

/* A spinning wait yields so that a thread that shares its core (the CT or rank that will
 * answer, on a machine with fewer cores than busy threads) runs far sooner than a futex sleep
 * would let it. A yield costs ~0.4 us even when no one else runs (a VM's syscall): one that
 * comes back that fast doubles the idle rounds (16 polls each) before the next, up to 64; one
 * that let another thread run brings them back to one. */
static void spin_yield(uint64_t now)
{
	sched_yield();
	if (gice_now_ns() - now < 2000)
		idle_yields += idle_yields < 6;
	else
		idle_yields = 0;
}

static int counter_wait(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns,
			uint64_t spin_ns, int idle, const tm_poll_t *poll, uint64_t *found)
{
	struct tm_counter *c = ctr(r, id);
	uint64_t start = gice_now_ns(), now = start, seen = 0;
	uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - start ?
				    UINT64_MAX : start + timeout_ns;
	uint64_t spin_end = spin_ns > UINT64_MAX - start ? UINT64_MAX : start + spin_ns;
	int rc;

	spin_end = GICE_MIN(spin_end, deadline);
	/* Spin phase: no futex; a yield after 16 idle polls or more (spin_yield) so a 2-core
	 * machine makes progress. */
	for (uint32_t i = 0, moved = 0, rounds = 0;; i++) {
		if (wait_check(r, c, cmp, v, &seen, &rc))
			goto out;
		if (poll && poll->fn(poll->arg) > 0) {
			/* it moved something: what we wait for may be next (look before reading the
			 * clock: the spin is extended at the next idle poll) */
			i = 0;
			moved = 1;
			continue;
		}
		if ((i & 15) == 15) {
			now = gice_now_ns();
			if (moved) {
				moved = 0;
				spin_end = GICE_MIN(spin_ns > UINT64_MAX - now ? UINT64_MAX : now + spin_ns, deadline);
			}
			if (now >= spin_end)
				break;
			if (++rounds >= 1u << idle_yields) {
				rounds = 0;
				spin_yield(now);
			}
		}
		gice_cpu_relax();
	}
	if (poll && poll->done)
		poll->done(poll->arg);
	uint64_t nap = poll ? poll->nap_ns : 0;

	/* Sleep phase. Register first (seq_cst, pairs with counter_notify's seq bump + waiters
	 * load), then read seq, then check: a write we do not see in the check bumped seq after
	 * our read, so futex_wait on that seq returns at once or is woken. */
	atomic_fetch_add_explicit(&c->waiters, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&r->state->waiting, 1, memory_order_relaxed);
	for (;;) {
		uint32_t s = atomic_load_explicit(&c->seq, memory_order_seq_cst);
		if (wait_check(r, c, cmp, v, &seen, &rc))
			break;
		now = gice_now_ns();
		if (now >= deadline) {
			/* idle: the timeout measures a stall; progress since the last look restarts it */
			if (idle && wait_progressed(r, c, &seq, deadline - timeout_ns)) {
				deadline = now + timeout_ns;
				continue;
			}
			rc = GICE_ERR_TIMED_OUT;
			break;
		}
		if (nap && deadline - now > nap) {
			/* poll now and then while asleep (the engine's own threads may be stalled) */
			if (gice_futex_wait(&c->seq, s, nap) == GICE_ERR_TIMED_OUT) {
				poll->fn(poll->arg);
				if (poll->done)
					poll->done(poll->arg);
			}
			continue;
		}
		gice_futex_wait(&c->seq, s, deadline == UINT64_MAX ? UINT64_MAX : deadline - now);
	}
	poll = NULL; /* done already */
	atomic_fetch_sub_explicit(&r->state->waiting, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
out:
	if (poll && poll->done)
		poll->done(poll->arg);
	/* Not logged here: a timeout may be expected; the caller logs it with its context. */
	if (found)
		*found = seen;
	return rc;
}

int tm_counter_wait(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns,
		    uint64_t spin_ns, uint64_t *found)
{
	return counter_wait(r, id, cmp, v, timeout_ns, spin_ns, 0, NULL, found);
}

int tm_counter_wait_idle(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t idle_ns,
			 uint64_t spin_ns, uint64_t *found)
{
	return counter_wait(r, id, cmp, v, idle_ns, spin_ns, 1, NULL, found);
}

int tm_counter_wait_poll(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns, int idle,
			 uint64_t spin_ns, const tm_poll_t *poll, uint64_t *found)
{
	return counter_wait(r, id, cmp, v, timeout_ns, spin_ns, idle, poll, found);
}

/* ---- the device's health ---- */

int tm_region_set_status(tm_region_t *r, int status)
{
	int32_t ok = GICE_OK;

	if (status >= 0)
		status = GICE_ERR_CANCELED;
	/* release: what the aborter recorded (the reason) before a waiter sees the status */
	if (!atomic_compare_exchange_strong_explicit(&r->state->status, &ok, status, memory_order_seq_cst,
						     memory_order_acquire))
		return ok; /* the first abort stands */
	return GICE_OK;
}

int tm_region_abort(tm_region_t *r, int status)
{
	int rc = tm_region_set_status(r, status);

	/* end every wait in progress: bump each watched-for counter and wake its sleepers (seq_cst
	 * pairs with the waiters' registration, as counter_notify does) */
	for (uint32_t i = 0; i < r->layout.n_counters; i++) {
		struct tm_counter *c = &r->counters[i];
		atomic_fetch_add_explicit(&c->seq, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&c->waiters, memory_order_seq_cst))
			gice_futex_wake(&c->seq, INT_MAX);
	}
	for (uint32_t ct = 0; ct < r->layout.n_cts; ct++)
		tm_doorbell_ring(r, ct);
	return rc;
}

int tm_region_status(const tm_region_t *r)
{
	return atomic_load_explicit(&r->state->status, memory_order_acquire);
}

void tm_progress(tm_region_t *r)
{
	uint64_t now = gice_coarse_ns(); /* its readers judge stalls of 100s of ms */

	/* read before write: the line stays shared (no store) between two notes a tick apart */
	if (now - atomic_load_explicit(&r->state->progress_ns, memory_order_relaxed) >= TM_PROGRESS_NS)
		atomic_store_explicit(&r->state->progress_ns, now, memory_order_relaxed);
}

uint64_t tm_progress_ns(const tm_region_t *r)
{
	return atomic_load_explicit(&r->state->progress_ns, memory_order_relaxed);
}

uint32_t tm_waiting(const tm_region_t *r)
{
	return atomic_load_explicit(&r->state->waiting, memory_order_relaxed);
}
