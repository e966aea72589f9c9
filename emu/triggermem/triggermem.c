/* triggermem.c: the trigger memory region of one device (see triggermem.h).
 *
 * Shared layout (all offsets from the region base, every section cache-line aligned):
 *
 *   struct tm_shm_hdr                          magic, version, sizes, layout, section offsets
 *   struct tm_state                            the device's health: abort status, progress
 *   struct tm_counter   [n_counters]           one cache line each
 *   struct tm_doorbell  [n_cts]                one cache line each
 *   dirty bitmap        [n_cts] x dirty_stride summary words, then counter words (tm_queue.c)
 *   request queue       [n_cts] x queue_stride struct tm_queue_hdr, then depth x struct tm_slot
 *
 * Only fixed-width integers live in the region; no pointers, so every process may map it at its
 * own address. All concurrently touched words are C11 atomics (they may be touched by another
 * process, which the compiler cannot see either).
 *
 * The futex protocols are described in tm_counter.c (counters) and tm_queue.c (doorbells);
 * the structures shared by the three files are in tm_internal.h.
 */
#include "emu/triggermem/tm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TM_MAGIC 0x4749525445434947ull /* bytes "GICETRIG" in memory (little endian) */
#define TM_VERSION 5u
#define TM_MAX_COUNTERS (1u << 20)
#define TM_MIN_QUEUE_DEPTH 2u
#define TM_MAX_QUEUE_DEPTH (1u << 16)
#define TM_PAGE 4096u

/* ---- region header ---- */

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
	for (uint32_t ct = 0; ct < TM_MAX_CTS; ct++)
		if (r->efd1[ct])
			close(r->efd1[ct] - 1);
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
