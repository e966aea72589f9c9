/* triggermem.c: the trigger memory region of one device (see triggermem.h).
 *
 * Shared layout (all offsets from the region base, every section cache-line aligned):
 *
 *   struct tm_shm_hdr                          magic, version, sizes, layout, section offsets
 *   struct tm_state                            the device's health: abort status, progress
 *   struct tm_counter   [n_counters]           one cache line each
 *   struct tm_doorbell  [n_cts]                one cache line each
 *   dirty bitmap        [n_cts] x dirty_stride summary words, then counter words (see below)
 *   request queue       [n_cts] x queue_stride struct tm_queue_hdr, then depth x struct tm_slot
 *
 * Only fixed-width integers live in the region; no pointers, so every process may map it at its
 * own address. All concurrently touched words are C11 atomics (they may be touched by another
 * process, which the compiler cannot see either).
 *
 * Futex protocols (all futexes are shared, so they work across processes):
 *  - counter: the writer changes value/fail, then bumps seq, then reads waiters; a waiter
 *    increments waiters, then reads seq, then checks value/fail, then futex-waits on that seq.
 *    Both pairs are seq_cst, so either the writer sees the waiter (and wakes it) or the waiter's
 *    seq read sees the bump (and futex_wait returns at once, or the check sees the new value).
 *  - doorbell: ring bumps seq, then reads sleeping; sleep sets sleeping, then reads seq and
 *    futex-waits only while seq == the value the CT saw before looking for work. Same argument.
 */
#include "emu/triggermem/triggermem.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TM_MAGIC 0x4749525445434947ull /* bytes "GICETRIG" in memory (little endian) */
#define TM_VERSION 2u
#define TM_MAX_COUNTERS (1u << 20)
#define TM_MIN_QUEUE_DEPTH 2u
#define TM_MAX_QUEUE_DEPTH (1u << 16)
#define TM_PAGE 4096u

/* ---- shared structures ---- */

/* Region header, at offset 0. Written by the creator before the fd is handed out; read-only
 * afterwards. */
struct tm_shm_hdr {
	uint64_t magic;         /* TM_MAGIC; first, so garbage is rejected early */
	uint32_t version;       /* TM_VERSION */
	uint32_t hdr_bytes;     /* sizeof(struct tm_shm_hdr) */
	uint64_t total_bytes;   /* size of the whole region == size of the memfd */
	uint32_t n_counters;    /* tm_layout_t.n_counters */
	uint32_t n_cts;         /* tm_layout_t.n_cts */
	uint32_t queue_depth;   /* tm_layout_t.queue_depth */
	uint32_t slot_bytes;    /* TM_SLOT_BYTES */
	uint64_t off_counters;  /* struct tm_counter[n_counters] */
	uint64_t off_doorbells; /* struct tm_doorbell[n_cts] */
	uint64_t off_dirty;     /* n_cts dirty bitmaps, dirty_stride bytes apart */
	uint64_t off_queues;    /* n_cts request queues, queue_stride bytes apart */
	uint64_t dirty_stride;  /* bytes per CT dirty bitmap (summary + words, line aligned) */
	uint64_t queue_stride;  /* bytes per CT queue (header + slots) */
	uint64_t off_state;     /* struct tm_state */
	uint8_t reserved[32];   /* zero */
};
_Static_assert(sizeof(struct tm_shm_hdr) == 128, "region header is two cache lines");
_Static_assert(offsetof(struct tm_shm_hdr, magic) == 0, "magic first");

/* One counter: trigger word and completion record. Exactly one cache line. */
struct tm_counter {
	_Atomic uint64_t value;   /* success count (the trigger word) */
	_Atomic uint64_t fail;    /* failure count */
	_Atomic uint64_t ts_ns;   /* CLOCK_MONOTONIC of the last change */
	_Atomic int32_t status;   /* last status recorded by tm_counter_fail */
	_Atomic uint32_t seq;     /* futex word, bumped by every write */
	_Atomic uint32_t waiters; /* threads registered to sleep on seq */
	_Atomic uint32_t watch;   /* bit c: CT c watches this counter */
	uint8_t pad[24];
};
_Static_assert(sizeof(struct tm_counter) == GICE_CACHELINE, "counter is one cache line");
_Static_assert(_Alignof(struct tm_counter) <= GICE_CACHELINE, "counter alignment");
_Static_assert(offsetof(struct tm_counter, seq) % 4 == 0, "futex word is 4-byte aligned");

/* The device's health, read by every wait: one cache line, written rarely (progress at most
 * once per TM_PROGRESS_NS). */
struct tm_state {
	_Atomic int32_t status;      /* GICE_OK, or why the device was aborted (ends every wait) */
	_Atomic uint32_t waiting;    /* waits asleep on this region's counters */
	_Atomic uint64_t progress_ns; /* CLOCK_MONOTONIC of the last progress noted */
	uint8_t pad[48];
};
_Static_assert(sizeof(struct tm_state) == GICE_CACHELINE, "state is one cache line");
#define TM_PROGRESS_NS 1000000ull /* progress time resolution */

/* CT doorbell. Exactly one cache line. */
struct tm_doorbell {
	_Atomic uint32_t seq;      /* futex word, bumped by every ring */
	_Atomic uint32_t sleeping; /* threads of the CT inside tm_doorbell_sleep (0 or 1 normally) */
	uint8_t pad[56];
};
_Static_assert(sizeof(struct tm_doorbell) == GICE_CACHELINE, "doorbell is one cache line");

/* Request queue header: producer and consumer index on separate cache lines. */
struct tm_queue_hdr {
	_Atomic uint64_t prod; /* next ticket to hand out (producers CAS it) */
	uint8_t pad0[56];
	_Atomic uint64_t cons; /* next ticket to consume (the CT only) */
	uint8_t pad1[56];
};
_Static_assert(sizeof(struct tm_queue_hdr) == 2 * GICE_CACHELINE, "queue header is two lines");

/* Request slot (Vyukov bounded queue): seq == ticket: free for the producer of that ticket;
 * seq == ticket + 1: full, readable by the consumer; the consumer then sets ticket + depth. */
struct tm_slot {
	uint8_t data[TM_REQ_MAX_BYTES];
	_Atomic uint64_t seq; /* last 8 bytes of the slot */
};
_Static_assert(sizeof(struct tm_slot) == TM_SLOT_BYTES, "slot size");
_Static_assert(offsetof(struct tm_slot, seq) == TM_SLOT_BYTES - 8, "slot sequence is last");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && _Alignof(_Atomic uint64_t) == 8, "atomic u64");

/* ---- process-local handle ---- */

struct tm_region {
	int fd;
	int owner; /* created here: may allocate counter ids */
	void *base;
	size_t size;
	tm_layout_t layout;
	struct tm_shm_hdr *hdr;
	struct tm_state *state;
	struct tm_counter *counters;
	struct tm_doorbell *doorbells;
	uint8_t *dirty;      /* first CT's bitmap */
	uint8_t *queues;     /* first CT's queue */
	uint64_t dirty_stride, queue_stride;
	uint32_t n_words;    /* dirty words per CT = n_counters / 64 */
	uint32_t n_summary;  /* summary words per CT */
	pthread_mutex_t lock; /* serializes the writers of alloc_bits */
	/* bit set: counter id in use (owner only). Written under lock by host threads; read without
	 * it by the CT that validates an arriving signal (tm_counter_allocated): atomic words. */
	_Atomic uint64_t *alloc_bits;
	uint32_t n_alloc;     /* ids in use, reserved ones included */
};

const gice_param_t tm_params[] = {
	{"GICE_COUNTERS", "4096",
	 "counters (trigger words and completion records) per device, multiple of 64",
	 GICE_PARAM_U64, 64, TM_MAX_COUNTERS},
	{"GICE_CT_QUEUE_DEPTH", "256", "slots in each CT request queue, power of two", GICE_PARAM_U64,
	 TM_MIN_QUEUE_DEPTH, TM_MAX_QUEUE_DEPTH},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* ---- layout ---- */

struct tm_offsets {
	uint64_t off_state, off_counters, off_doorbells, off_dirty, off_queues;
	uint64_t dirty_stride, queue_stride, total;
	uint32_t n_words, n_summary;
};

static int layout_check(const tm_layout_t *l)
{
	if (l->n_counters < 64 || l->n_counters % 64 || l->n_counters > TM_MAX_COUNTERS) {
		gice_error("tm", "n_counters %u must be a multiple of 64 in [64, %u]", l->n_counters,
			   TM_MAX_COUNTERS);
		return GICE_ERR_INVALID;
	}
	if (l->n_cts < 1 || l->n_cts > TM_MAX_CTS || l->n_cts >= l->n_counters) {
		gice_error("tm", "n_cts %u must be in [1, %u] (n_counters %u)", l->n_cts, TM_MAX_CTS,
			   l->n_counters);
		return GICE_ERR_INVALID;
	}
	if (l->queue_depth < TM_MIN_QUEUE_DEPTH || l->queue_depth > TM_MAX_QUEUE_DEPTH ||
	    (l->queue_depth & (l->queue_depth - 1))) {
		gice_error("tm", "queue_depth %u must be a power of two in [%u, %u]", l->queue_depth,
			   TM_MIN_QUEUE_DEPTH, TM_MAX_QUEUE_DEPTH);
		return GICE_ERR_INVALID;
	}
	return GICE_OK;
}

static void layout_offsets(const tm_layout_t *l, struct tm_offsets *o)
{
	uint64_t off = GICE_ALIGN_UP(sizeof(struct tm_shm_hdr), GICE_CACHELINE);

	o->n_words = l->n_counters / 64;
	o->n_summary = (o->n_words + 63) / 64;
	o->off_state = off;
	off += sizeof(struct tm_state);
	o->off_counters = off;
	off += (uint64_t)l->n_counters * sizeof(struct tm_counter);
	o->off_doorbells = off;
	off += (uint64_t)l->n_cts * sizeof(struct tm_doorbell);
	o->dirty_stride = GICE_ALIGN_UP((uint64_t)(o->n_summary + o->n_words) * 8, GICE_CACHELINE);
	o->off_dirty = off;
	off += (uint64_t)l->n_cts * o->dirty_stride;
	o->queue_stride = sizeof(struct tm_queue_hdr) + (uint64_t)l->queue_depth * TM_SLOT_BYTES;
	o->off_queues = off;
	off += (uint64_t)l->n_cts * o->queue_stride;
	o->total = GICE_ALIGN_UP(off, TM_PAGE);
}

static void region_bind(tm_region_t *r, const tm_layout_t *l, const struct tm_offsets *o)
{
	uint8_t *b = r->base;

	r->layout = *l;
	r->hdr = r->base;
	r->state = (struct tm_state *)(b + o->off_state);
	r->counters = (struct tm_counter *)(b + o->off_counters);
	r->doorbells = (struct tm_doorbell *)(b + o->off_doorbells);
	r->dirty = b + o->off_dirty;
	r->queues = b + o->off_queues;
	r->dirty_stride = o->dirty_stride;
	r->queue_stride = o->queue_stride;
	r->n_words = o->n_words;
	r->n_summary = o->n_summary;
}

static inline struct tm_counter *ctr(const tm_region_t *r, uint32_t id)
{
	assert(id < r->layout.n_counters);
	return &r->counters[id];
}

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

static inline struct tm_queue_hdr *queue_hdr(const tm_region_t *r, uint32_t ct)
{
	assert(ct < r->layout.n_cts);
	return (struct tm_queue_hdr *)(r->queues + (uint64_t)ct * r->queue_stride);
}

static inline struct tm_slot *queue_slots(const tm_region_t *r, uint32_t ct)
{
	return (struct tm_slot *)(queue_hdr(r, ct) + 1);
}

/* ---- region life cycle ---- */

int tm_region_create(const tm_layout_t *layout, const char *name, tm_region_t **out)
{
	struct tm_offsets o;
	char fdname[64];
	tm_region_t *r;
	int rc;

	if (!layout || !out)
		return GICE_ERR_INVALID;
	rc = layout_check(layout);
	if (rc)
		return rc;
	layout_offsets(layout, &o);

	r = calloc(1, sizeof(*r));
	if (!r) {
		gice_error("tm", "no memory for the region handle");
		return GICE_ERR_NO_MEMORY;
	}
	r->alloc_bits = calloc(o.n_words, sizeof(*r->alloc_bits));
	if (!r->alloc_bits) {
		gice_error("tm", "no memory for the allocation bitmap of %u counters", layout->n_counters);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_region;
	}
	snprintf(fdname, sizeof(fdname), "gice-tm-%s", name ? name : "anon");
	/* CLOEXEC: children inherit it across fork; other programs get it via SCM_RIGHTS or
	 * /proc/PID/fd. */
	r->fd = memfd_create(fdname, MFD_CLOEXEC);
	if (r->fd < 0) {
		gice_error("tm", "memfd_create(%s): %m", fdname);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_bits;
	}
	if (ftruncate(r->fd, (off_t)o.total) < 0) {
		gice_error("tm", "ftruncate(%s, %llu): %m", fdname, (unsigned long long)o.total);
		rc = GICE_ERR_NO_MEMORY;
		goto err_close;
	}
	r->base = mmap(NULL, o.total, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		gice_error("tm", "mmap(%s, %llu): %m", fdname, (unsigned long long)o.total);
		rc = GICE_ERR_NO_MEMORY;
		goto err_close;
	}
	r->size = o.total;
	r->owner = 1;
	region_bind(r, layout, &o);
	rc = pthread_mutex_init(&r->lock, NULL);
	if (rc) {
		gice_error("tm", "pthread_mutex_init: %s", strerror(rc));
		rc = GICE_ERR_NO_MEMORY;
		goto err_unmap;
	}

	/* The memfd is zeroed: counters, doorbells, bitmaps and queue indexes start at 0. A slot
	 * starts free for the ticket of its index. */
	for (uint32_t c = 0; c < layout->n_cts; c++) {
		struct tm_slot *s = queue_slots(r, c);
		for (uint32_t i = 0; i < layout->queue_depth; i++)
			atomic_store_explicit(&s[i].seq, i, memory_order_relaxed);
	}
	/* Ids 0..n_cts-1 are the queues' retired-ticket counters: never handed out. */
	for (uint32_t c = 0; c < layout->n_cts; c++)
		atomic_fetch_or_explicit(&r->alloc_bits[c / 64], 1ull << (c % 64), memory_order_relaxed);
	r->n_alloc = layout->n_cts;

	struct tm_shm_hdr *h = r->hdr;
	h->version = TM_VERSION;
	h->hdr_bytes = sizeof(*h);
	h->total_bytes = o.total;
	h->n_counters = layout->n_counters;
	h->n_cts = layout->n_cts;
	h->queue_depth = layout->queue_depth;
	h->slot_bytes = TM_SLOT_BYTES;
	h->off_counters = o.off_counters;
	h->off_doorbells = o.off_doorbells;
	h->off_dirty = o.off_dirty;
	h->off_queues = o.off_queues;
	h->dirty_stride = o.dirty_stride;
	h->queue_stride = o.queue_stride;
	h->off_state = o.off_state;
	atomic_store_explicit(&r->state->progress_ns, gice_now_ns(), memory_order_relaxed);
	/* Magic last, release: whoever sees the magic sees a complete header and initialised slots. */
	__atomic_store_n(&h->magic, TM_MAGIC, __ATOMIC_RELEASE);

	gice_debug("tm", "region %s: %u counters, %u CTs, queue depth %u, %llu bytes", fdname,
		   layout->n_counters, layout->n_cts, layout->queue_depth, (unsigned long long)o.total);
	*out = r;
	return GICE_OK;

err_unmap:
	munmap(r->base, o.total);
err_close:
	close(r->fd);
err_free_bits:
	free((void *)r->alloc_bits);
err_free_region:
	free(r);
	return rc;
}

int tm_region_attach(int fd, tm_region_t **out)
{
	struct tm_offsets o;
	struct stat st;
	tm_layout_t l;
	tm_region_t *r;
	int rc;

	if (!out)
		return GICE_ERR_INVALID;
	if (fd < 0) {
		gice_error("tm", "attach: bad fd %d", fd);
		return GICE_ERR_INVALID;
	}
	if (fstat(fd, &st) < 0) {
		gice_error("tm", "attach: fd %d is not an open file: %m", fd);
		return GICE_ERR_INVALID;
	}
	if (st.st_size < (off_t)sizeof(struct tm_shm_hdr)) {
		gice_error("tm", "attach: fd %d has size %lld, smaller than the %zu-byte header", fd,
			   (long long)st.st_size, sizeof(struct tm_shm_hdr));
		return GICE_ERR_INVALID;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		gice_error("tm", "no memory for the region handle");
		return GICE_ERR_NO_MEMORY;
	}
	/* Our own descriptor: the caller keeps (and may close) fd. */
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		gice_error("tm", "attach: dup of fd %d: %m", fd);
		rc = GICE_ERR_INVALID;
		goto err_free_region;
	}
	r->size = (size_t)st.st_size;
	r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		gice_error("tm", "attach: mmap of fd %d (%zu bytes): %m", fd, r->size);
		rc = GICE_ERR_INVALID;
		goto err_close;
	}

	const struct tm_shm_hdr *h = r->base;
	uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE); /* pairs with create */
	if (magic != TM_MAGIC || h->version != TM_VERSION || h->hdr_bytes != sizeof(*h) ||
	    h->total_bytes != (uint64_t)st.st_size || h->slot_bytes != TM_SLOT_BYTES) {
		gice_error("tm",
			   "attach: fd %d is not a trigger memory region: magic 0x%016llx (want 0x%016llx), "
			   "version %u (want %u), header %u bytes (want %zu), size %llu (file %lld), slot %u",
			   fd, (unsigned long long)magic, (unsigned long long)TM_MAGIC, h->version, TM_VERSION,
			   h->hdr_bytes, sizeof(*h), (unsigned long long)h->total_bytes,
			   (long long)st.st_size, h->slot_bytes);
		rc = GICE_ERR_INVALID;
		goto err_unmap;
	}
	l.n_counters = h->n_counters;
	l.n_cts = h->n_cts;
	l.queue_depth = h->queue_depth;
	if (layout_check(&l)) {
		rc = GICE_ERR_INVALID;
		goto err_unmap;
	}
	layout_offsets(&l, &o);
	if (o.total != h->total_bytes || o.off_counters != h->off_counters ||
	    o.off_doorbells != h->off_doorbells || o.off_dirty != h->off_dirty ||
	    o.off_queues != h->off_queues || o.dirty_stride != h->dirty_stride ||
	    o.queue_stride != h->queue_stride || o.off_state != h->off_state) {
		gice_error("tm",
			   "attach: fd %d: section offsets do not match the layout (%u counters, %u CTs, "
			   "depth %u): size %llu/%llu counters %llu/%llu doorbells %llu/%llu dirty %llu/%llu "
			   "queues %llu/%llu (found/expected)",
			   fd, l.n_counters, l.n_cts, l.queue_depth, (unsigned long long)h->total_bytes,
			   (unsigned long long)o.total, (unsigned long long)h->off_counters,
			   (unsigned long long)o.off_counters, (unsigned long long)h->off_doorbells,
			   (unsigned long long)o.off_doorbells, (unsigned long long)h->off_dirty,
			   (unsigned long long)o.off_dirty, (unsigned long long)h->off_queues,
			   (unsigned long long)o.off_queues);
		rc = GICE_ERR_INVALID;
		goto err_unmap;
	}
	region_bind(r, &l, &o);
	rc = pthread_mutex_init(&r->lock, NULL);
	if (rc) {
		gice_error("tm", "pthread_mutex_init: %s", strerror(rc));
		rc = GICE_ERR_NO_MEMORY;
		goto err_unmap;
	}
	*out = r;
	return GICE_OK;

err_unmap:
	munmap(r->base, r->size);
err_close:
	close(r->fd);
err_free_region:
	free(r);
	return rc;
}

void tm_region_destroy(tm_region_t *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	munmap(r->base, r->size);
	close(r->fd);
	free((void *)r->alloc_bits);
	free(r);
}

int tm_region_fd(const tm_region_t *r)
{
	return r->fd;
}

const tm_layout_t *tm_region_layout(const tm_region_t *r)
{
	return &r->layout;
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

/* ---- dirty bitmaps and doorbells ---- */

void tm_doorbell_ring(tm_region_t *r, uint32_t ct)
{
	struct tm_doorbell *db = bell(r, ct);

	/* seq_cst RMW then seq_cst load: ordered against the sleeper's sleeping store / seq load
	 * (see the protocol at the top), and releases everything written before the ring. */
	atomic_fetch_add_explicit(&db->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&db->sleeping, memory_order_seq_cst))
		gice_futex_wake(&db->seq, INT_MAX);
}

uint32_t tm_doorbell_seq(const tm_region_t *r, uint32_t ct)
{
	/* acquire: work published before the ring that produced this seq is visible afterwards */
	return atomic_load_explicit(&bell(r, ct)->seq, memory_order_acquire);
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

void tm_dirty_mark(tm_region_t *r, uint32_t ct, uint32_t id)
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
		return;
	/* Word bit before summary bit (release): a taker that sees the summary bit finds the word
	 * bit. */
	atomic_fetch_or_explicit(&sum[w / 64], 1ull << (w % 64), memory_order_release);
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

static inline void counter_notify(tm_region_t *r, uint32_t id, struct tm_counter *c)
{
	/* seq_cst RMW: releases the value/fail change to waiters that read seq (acquire) and is
	 * ordered before the waiters load (Dekker pair with tm_counter_wait's registration). */
	atomic_fetch_add_explicit(&c->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->waiters, memory_order_seq_cst))
		gice_futex_wake(&c->seq, INT_MAX);
	/* seq_cst: after the value change, pairs with tm_counter_watch (see there). */
	uint32_t m = atomic_load_explicit(&c->watch, memory_order_seq_cst);
	while (gice_unlikely(m)) {
		uint32_t ct = (uint32_t)__builtin_ctz(m);
		m &= m - 1;
		tm_dirty_mark(r, ct, id);
	}
}

void tm_counter_add(tm_region_t *r, uint32_t id, uint64_t v)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_fetch_add_explicit(&c->value, v, memory_order_seq_cst);
	counter_notify(r, id, c);
}

void tm_counter_set(tm_region_t *r, uint32_t id, uint64_t v)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_store_explicit(&c->value, v, memory_order_seq_cst);
	counter_notify(r, id, c);
}

void tm_counter_fail(tm_region_t *r, uint32_t id, int status)
{
	struct tm_counter *c = ctr(r, id);

	counter_stamp(c);
	atomic_store_explicit(&c->status, status, memory_order_relaxed);
	/* seq_cst (so release): a reader that sees the new failure count sees the status. */
	atomic_fetch_add_explicit(&c->fail, 1, memory_order_seq_cst);
	counter_notify(r, id, c);
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

static int counter_wait(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns,
			uint64_t spin_ns, int idle, uint64_t *found)
{
	struct tm_counter *c = ctr(r, id);
	uint64_t start = gice_now_ns(), now = start, seen = 0;
	uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - start ?
				    UINT64_MAX : start + timeout_ns;
	uint64_t spin_end = spin_ns > UINT64_MAX - start ? UINT64_MAX : start + spin_ns;
	int rc;

	spin_end = GICE_MIN(spin_end, deadline);
	/* Spin phase: no futex; a yield every 16 polls so a 2-core machine makes progress. */
	for (uint32_t i = 0;; i++) {
		if (wait_check(r, c, cmp, v, &seen, &rc))
			goto out;
		if ((i & 15) == 15) {
			now = gice_now_ns();
			if (now >= spin_end)
				break;
			/* yield often: with GICE_BIND the CT that will answer shares this core, and
			 * a yield hands it the core far sooner than a futex sleep would */
			sched_yield();
		}
		gice_cpu_relax();
	}

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
		gice_futex_wait(&c->seq, s, deadline == UINT64_MAX ? UINT64_MAX : deadline - now);
	}
	atomic_fetch_sub_explicit(&r->state->waiting, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
out:
	/* Not logged here: a timeout may be expected; the caller logs it with its context. */
	if (found)
		*found = seen;
	return rc;
}

int tm_counter_wait(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns,
		    uint64_t spin_ns, uint64_t *found)
{
	return counter_wait(r, id, cmp, v, timeout_ns, spin_ns, 0, found);
}

int tm_counter_wait_idle(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t idle_ns,
			 uint64_t spin_ns, uint64_t *found)
{
	return counter_wait(r, id, cmp, v, idle_ns, spin_ns, 1, found);
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
	uint64_t now = gice_now_ns();

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

/* ---- request queues ---- */

int tm_queue_push(tm_region_t *r, uint32_t ct, const void *req, uint32_t len, uint64_t *ticket)
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
	tm_doorbell_ring(r, ct);
	if (ticket)
		*ticket = pos;
	return GICE_OK;
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
