/* hbm_internal.h: what the files of the device memory module share (not for other modules):
 * hbm.c (the arena), hbm_alloc.c (the allocator), hbm_reg.c (registration and translation). The
 * synchronization between set-up calls and the lock-free translate calls is described in hbm.c. */
#ifndef GICE_HBM_INTERNAL_H
#define GICE_HBM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "emu/hbm/hbm.h"

#define HBM_HASH_EMPTY 0u
#define HBM_PAGE_NONE 0u
#define HBM_PAGE_MULTI UINT32_MAX /* several regions touch the page: scan */

typedef struct {
	uint64_t off, len; /* len: rounded span actually taken from the free list */
	uint64_t size;     /* bytes requested: the registrable extent */
} hbm_block_t;

typedef struct {
	_Atomic uint64_t key; /* 0: slot free; written last on publish, first on retire */
	_Atomic uint64_t off;
	_Atomic uint64_t len;
} hbm_slot_t;

struct hbm {
	void *base;
	uint64_t size;
	int fd;
	pthread_mutex_t lock; /* serializes every set-up call */

	/* allocator, under lock */
	hbm_block_t *free_list; /* sorted by offset, never adjacent (coalesced) */
	uint32_t nfree, free_cap;
	hbm_block_t *allocs; /* sorted by offset */
	uint32_t nallocs, alloc_cap;
	_Atomic uint64_t free_bytes;

	/* registration: slots, key hash, page table */
	uint32_t max_regions;
	hbm_slot_t *slots;
	uint32_t *slot_free; /* stack of free slot indices, under lock */
	uint32_t nslot_free;
	_Atomic uint32_t slot_hw; /* slots [0, slot_hw) may be live: bound of the reader's scan */
	_Atomic uint32_t *hash;   /* slot index + 1, or HBM_HASH_EMPTY; linear probing */
	uint32_t hash_mask;
	_Atomic uint32_t *page; /* per 64 KiB page: slot + 1, HBM_PAGE_NONE or HBM_PAGE_MULTI */
	uint32_t *page_cnt;     /* regions touching each page, under lock */
	uint64_t npages;
	_Atomic uint64_t gen; /* odd while a writer changes hash or page table */
};

/* ---- generation seqlock over the indexes ----
 * No atomic_thread_fence (TSan does not model fences): every store a writer makes inside the
 * window is a release store and every load a reader makes of it is an acquire load, so a reader
 * that sees any store made after the odd generation also sees the odd generation (or a later
 * one) when it re-reads h->gen; and acquire loads keep that re-read after them. */

static inline void gen_begin(hbm_t *h)
{
	uint64_t g = atomic_load_explicit(&h->gen, memory_order_relaxed);

	/* the release stores that follow order this one before them */
	atomic_store_explicit(&h->gen, g + 1, memory_order_relaxed);
}

static inline void gen_end(hbm_t *h)
{
	uint64_t g = atomic_load_explicit(&h->gen, memory_order_relaxed);

	/* release: index stores above are visible to whoever sees the even generation */
	atomic_store_explicit(&h->gen, g + 1, memory_order_release);
}

/* Reader: true when a negative lookup that started at generation g1 may be trusted. */
static inline int gen_stable(const hbm_t *h, uint64_t g1)
{
	/* the lookup's loads were acquire loads: this re-read cannot move before them */
	return !(g1 & 1) && atomic_load_explicit(&((hbm_t *)h)->gen, memory_order_relaxed) == g1;
}

/* ---- slot read (seqlock on the key) ---- */

/* Snapshot slot i; returns its key (0 if free or changed under us). The writer stores off/len
 * with release after retiring the old key (key = 0): reading a new off or len (acquire) makes
 * the retirement visible to the key re-read, which the acquire loads also keep after them. */
static inline uint64_t slot_read(const hbm_slot_t *s, uint64_t *off, uint64_t *len)
{
	hbm_slot_t *w = (hbm_slot_t *)s;
	uint64_t k1 = atomic_load_explicit(&w->key, memory_order_acquire);

	if (!k1)
		return 0;
	*off = atomic_load_explicit(&w->off, memory_order_acquire);
	*len = atomic_load_explicit(&w->len, memory_order_acquire);
	if (atomic_load_explicit(&w->key, memory_order_relaxed) != k1)
		return 0;
	return k1;
}

/* [off, off+len) inside [roff, roff+rlen), overflow safe. len 0 may sit at the region end. */
static inline int range_inside(uint64_t off, uint64_t len, uint64_t roff, uint64_t rlen)
{
	return off >= roff && off - roff <= rlen && len <= rlen - (off - roff);
}

static inline uint32_t key_hash(const hbm_t *h, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & h->hash_mask;
}

/* hbm_alloc.c: the live allocation containing device offset off, or NULL. Under lock. */
hbm_block_t *hbm_alloc_containing(hbm_t *h, uint64_t off);
/* hbm_reg.c: the key of a live region overlapping [off, off+len), 0 if none. Under lock. */
uint64_t hbm_region_overlapping(hbm_t *h, uint64_t off, uint64_t len);

#endif
