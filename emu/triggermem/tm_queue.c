/* tm_queue.c: what wakes and feeds the CTs of a trigger memory region (see triggermem.h):
 * the doorbells, the dirty bitmaps (counters a CT watches that changed) and the request
 * queues (bounded multi-producer queues, one per CT, of requests from kernels and hosts).
 *
 * Futex protocol (the futex is shared, so it works across processes):
 *  - doorbell: ring bumps seq, then reads sleeping; sleep sets sleeping, then reads seq and
 *    futex-waits only while seq == the value the CT saw before looking for work. Same argument
 *    as for the counters (tm_counter.c).
 */
#include "emu/triggermem/tm_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static inline struct tm_doorbell *bell(const tm_region_t *r, uint32_t ct)
{
	assert(ct < r->layout.n_cts);
	return &r->doorbells[ct];
}

/* Dirty bitmap of ct: n_summary summary words (bit w: word w may be non-zero), then n_words. */
static inline _Atomic uint64_t *dirty_summary(const tm_region_t *r, uint32_t ct)
{
	return (_Atomic uint64_t *)(r->dirty + (uint64_t)ct * r->dirty_stride);
}

static inline _Atomic uint64_t *dirty_words(const tm_region_t *r, uint32_t ct)
{
	return dirty_summary(r, ct) + r->n_summary;
}

/* ---- dirty bitmaps and doorbells ---- */

int tm_doorbell_ring(tm_region_t *r, uint32_t ct)
{
	struct tm_doorbell *db = bell(r, ct);

	/* seq_cst RMW then seq_cst load: ordered against the sleeper's sleeping store / seq load
	 * (see the protocol at the top), and releases everything written before the ring. */
	atomic_fetch_add_explicit(&db->seq, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&db->sleeping, memory_order_seq_cst))
		return 0;
	if (!atomic_load_explicit(&db->polling, memory_order_seq_cst)) {
		gice_futex_wake(&db->seq, INT_MAX);
		return 1;
	}
	int e1 = atomic_load_explicit(&r->efd1[ct], memory_order_acquire);
	if (e1) { /* asleep in poll() in this process; from another it wakes at its timeout */
		uint64_t one = 1;
		if (write(e1 - 1, &one, sizeof(one)) < 0 && errno != EAGAIN)
			gice_warn("tm", "doorbell eventfd write: %s", strerror(errno));
	}
	return e1 != 0;
}

uint32_t tm_doorbell_seq(const tm_region_t *r, uint32_t ct)
{
	/* acquire: work published before the ring that produced this seq is visible afterwards */
	return atomic_load_explicit(&bell(r, ct)->seq, memory_order_acquire);
}

void tm_doorbell_awake(tm_region_t *r, uint32_t ct, int delta)
{
	/* seq_cst: ordered against tm_doorbell_kick's load (see triggermem.h) */
	atomic_fetch_add_explicit(&bell(r, ct)->awake, (uint32_t)delta, memory_order_seq_cst);
}

void tm_doorbell_lease(tm_region_t *r, uint32_t ct, uint64_t now_ns, uint64_t len_ns)
{
	struct tm_doorbell *db = bell(r, ct);

	/* relaxed: a kicker that reads an older end rings (a ring too many), one that reads this
	 * one nudges at its end (the work is found before, or the nudge rings) */
	if (now_ns + len_ns / 2 > atomic_load_explicit(&db->lease_ns, memory_order_relaxed))
		atomic_store_explicit(&db->lease_ns, now_ns + len_ns, memory_order_relaxed);
}

uint32_t tm_doorbell_awake_n(const tm_region_t *r, uint32_t ct)
{
	return atomic_load_explicit(&bell(r, ct)->awake, memory_order_relaxed);
}

uint64_t tm_doorbell_lease_end(const tm_region_t *r, uint32_t ct)
{
	return atomic_load_explicit(&bell(r, ct)->lease_ns, memory_order_relaxed);
}

uint64_t tm_doorbell_nudge(tm_region_t *r, uint32_t ct, int *woke)
{
	struct tm_doorbell *db = bell(r, ct);
	int w = 0;
	uint64_t until = 0;

	if (!atomic_load_explicit(&db->awake, memory_order_seq_cst)) {
		until = atomic_load_explicit(&db->lease_ns, memory_order_relaxed);
		if (!until || until <= gice_now_ns()) {
			until = 0;
			w = tm_doorbell_ring(r, ct);
		}
	}
	if (woke)
		*woke = w;
	return until;
}

uint64_t tm_doorbell_kick(tm_region_t *r, uint32_t ct, uint32_t n, int *woke)
{
	struct tm_doorbell *db = bell(r, ct);

	atomic_fetch_add_explicit(n ? &db->sent : &db->pokes, n ? n : 1, memory_order_seq_cst);
	return tm_doorbell_nudge(r, ct, woke);
}

void tm_doorbell_unsent(tm_region_t *r, uint32_t ct, uint32_t n)
{
	atomic_fetch_sub_explicit(&bell(r, ct)->sent, n, memory_order_seq_cst);
}

uint32_t tm_doorbell_sent(const tm_region_t *r, uint32_t ct)
{
	/* seq_cst: after the leaver's subtraction from awake (tm_doorbell_awake) */
	return atomic_load_explicit(&bell(r, ct)->sent, memory_order_seq_cst);
}

uint32_t tm_doorbell_pokes(const tm_region_t *r, uint32_t ct)
{
	return atomic_load_explicit(&bell(r, ct)->pokes, memory_order_seq_cst);
}

int tm_doorbell_sleep(tm_region_t *r, uint32_t ct, uint32_t seen_seq, uint64_t timeout_ns)
{
	struct tm_doorbell *db = bell(r, ct);
	int rc = GICE_OK;

	/* Announce the sleep before re-reading seq (seq_cst pair with tm_doorbell_ring): a ring
	 * that reads sleeping == 0 happened before this store, so its seq bump is seen below. */
	atomic_fetch_add_explicit(&db->sleeping, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst); /* sleeping store before the seq load */
	if (atomic_load_explicit(&db->seq, memory_order_seq_cst) == seen_seq)
		rc = gice_futex_wait(&db->seq, seen_seq, timeout_ns);
	atomic_fetch_sub_explicit(&db->sleeping, 1, memory_order_relaxed);
	return rc;
}

int tm_doorbell_sleep_fd(tm_region_t *r, uint32_t ct, uint32_t seen_seq, int fd, uint64_t timeout_ns)
{
	struct tm_doorbell *db = bell(r, ct);
	int e1 = atomic_load_explicit(&r->efd1[ct], memory_order_acquire);
	int rc = GICE_OK;

	if (!e1) { /* the CT's own thread, once */
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd < 0)
			return tm_doorbell_sleep(r, ct, seen_seq, timeout_ns);
		e1 = efd + 1;
		atomic_store_explicit(&r->efd1[ct], e1, memory_order_release);
	}
	atomic_fetch_add_explicit(&db->polling, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&db->sleeping, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst); /* as tm_doorbell_sleep */
	if (atomic_load_explicit(&db->seq, memory_order_seq_cst) == seen_seq) {
		struct pollfd p[2] = {{.fd = e1 - 1, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
		int ms = timeout_ns == UINT64_MAX ? -1 : (int)GICE_MIN((timeout_ns + 999999) / 1000000, (uint64_t)INT_MAX);
		int n = poll(p, 2, ms);
		if (n == 0)
			rc = GICE_ERR_TIMED_OUT;
		if (n > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;
			if (read(e1 - 1, &v, sizeof(v)) < 0 && errno != EAGAIN)
				gice_warn("tm", "doorbell eventfd read: %s", strerror(errno));
		}
	}
	atomic_fetch_sub_explicit(&db->sleeping, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&db->polling, 1, memory_order_relaxed);
	return rc;
}

int tm_dirty_set(tm_region_t *r, uint32_t ct, uint32_t id)
{
	_Atomic uint64_t *sum = dirty_summary(r, ct);
	_Atomic uint64_t *words = dirty_words(r, ct);
	uint32_t w = id / 64;
	uint64_t bit = 1ull << (id % 64);

	assert(id < r->layout.n_counters);
	/* acq_rel: releases the counter write to the CT's tm_dirty_take exchange. If the bit was
	 * already set, the marker that set it has yet to set (or has set) the summary bit and ring;
	 * the take that clears our bit reads our RMW, so it sees our counter write too. */
	if (atomic_fetch_or_explicit(&words[w], bit, memory_order_acq_rel) & bit)
		return 0;
	/* Word bit before summary bit (release): a taker that sees the summary bit finds the word
	 * bit. */
	atomic_fetch_or_explicit(&sum[w / 64], 1ull << (w % 64), memory_order_release);
	return 1;
}

void tm_dirty_mark(tm_region_t *r, uint32_t ct, uint32_t id)
{
	if (tm_dirty_set(r, ct, id))
		tm_doorbell_ring(r, ct);
}

uint32_t tm_dirty_take(tm_region_t *r, uint32_t ct, uint32_t *ids, uint32_t max)
{
	_Atomic uint64_t *sum = dirty_summary(r, ct);
	_Atomic uint64_t *words = dirty_words(r, ct);
	uint32_t n = 0;

	for (uint32_t s = 0; s < r->n_summary && n < max; s++) {
		uint64_t sbits = atomic_load_explicit(&sum[s], memory_order_relaxed);
		while (sbits && n < max) {
			uint32_t b = (uint32_t)__builtin_ctzll(sbits);
			uint32_t w = s * 64 + b;
			sbits &= sbits - 1;
			/* Clear the summary bit before taking the word (acq_rel keeps the exchange
			 * after it): a mark that lands after the exchange sets the summary bit again. */
			atomic_fetch_and_explicit(&sum[s], ~(1ull << b), memory_order_acq_rel);
			/* acq_rel: acquires the counter writes of every marker whose bit we take. */
			uint64_t bits = atomic_exchange_explicit(&words[w], 0, memory_order_acq_rel);
			while (bits) {
				if (n == max) {
					/* No room: put the rest back, word then summary. */
					atomic_fetch_or_explicit(&words[w], bits, memory_order_release);
					atomic_fetch_or_explicit(&sum[s], 1ull << b, memory_order_release);
					return n;
				}
				ids[n++] = w * 64 + (uint32_t)__builtin_ctzll(bits);
				bits &= bits - 1;
			}
		}
	}
	return n;
}

/* ---- request queues ---- */

int tm_queue_put(tm_region_t *r, uint32_t ct, const void *req, uint32_t len, uint64_t *ticket)
{
	struct tm_queue_hdr *q = queue_hdr(r, ct);
	struct tm_slot *slots = queue_slots(r, ct), *s;
	uint64_t mask = r->layout.queue_depth - 1;
	uint64_t pos;

	if (gice_unlikely(len > TM_REQ_MAX_BYTES)) {
		gice_error("tm", "request of %u bytes exceeds the slot payload of %u bytes", len,
			   TM_REQ_MAX_BYTES);
		return GICE_ERR_INVALID;
	}
	pos = atomic_load_explicit(&q->prod, memory_order_relaxed);
	for (;;) {
		s = &slots[pos & mask];
		/* acquire: the consumer's release of this slot (its reads of the old data are done) */
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			/* Free for ticket pos: reserve it. relaxed: the slot seq orders the data. */
			if (atomic_compare_exchange_weak_explicit(&q->prod, &pos, pos + 1,
								  memory_order_relaxed, memory_order_relaxed))
				break;
			/* pos reloaded by the failed CAS */
		} else if (dif < 0) {
			return GICE_ERR_AGAIN; /* slot still holds ticket pos - depth: full */
		} else {
			pos = atomic_load_explicit(&q->prod, memory_order_relaxed);
		}
	}
	memcpy(s->data, req, len);
	memset(s->data + len, 0, TM_REQ_MAX_BYTES - len);
	/* release: the payload before the slot is marked full */
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	if (ticket)
		*ticket = pos;
	return GICE_OK;
}

int tm_queue_push(tm_region_t *r, uint32_t ct, const void *req, uint32_t len, uint64_t *ticket)
{
	int rc = tm_queue_put(r, ct, req, len, ticket);

	if (rc == GICE_OK)
		tm_doorbell_ring(r, ct);
	return rc;
}

int tm_queue_pop(tm_region_t *r, uint32_t ct, void *buf, uint64_t *ticket)
{
	struct tm_queue_hdr *q = queue_hdr(r, ct);
	struct tm_slot *s;
	uint64_t pos = atomic_load_explicit(&q->cons, memory_order_relaxed); /* only we write it */

	s = &queue_slots(r, ct)[pos & (r->layout.queue_depth - 1)];
	/* acquire: pairs with the producer's release, so the payload is complete */
	if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
		return 0; /* empty, or the producer of ticket pos is still copying */
	memcpy(buf, s->data, TM_REQ_MAX_BYTES);
	/* release: our payload read is done before the slot is free for ticket pos + depth */
	atomic_store_explicit(&s->seq, pos + r->layout.queue_depth, memory_order_release);
	atomic_store_explicit(&q->cons, pos + 1, memory_order_relaxed);
	if (ticket)
		*ticket = pos;
	return 1;
}

uint64_t tm_queue_prod(const tm_region_t *r, uint32_t ct)
{
	return atomic_load_explicit(&queue_hdr(r, ct)->prod, memory_order_acquire);
}
