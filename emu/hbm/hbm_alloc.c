/* hbm_alloc.c: the first-fit allocator of device memory (set-up path, under the lock): sorted
 * arrays of free and allocated blocks, coalescing on free, allocation inside a pool's range
 * (hbm_alloc_in) and its usage. */
#include <stdlib.h>
#include <string.h>

#include "emu/hbm/hbm_internal.h"

/* ---- sorted block arrays (set-up path, under lock) ---- */

static int blocks_reserve(hbm_block_t **arr, uint32_t *cap, uint32_t need)
{
	hbm_block_t *n;
	uint32_t ncap = *cap;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	n = realloc(*arr, (size_t)ncap * sizeof(*n));
	if (!n)
		return -1;
	*arr = n;
	*cap = ncap;
	return 0;
}

static void blocks_insert(hbm_block_t *arr, uint32_t *n, uint32_t at, hbm_block_t b)
{
	memmove(&arr[at + 1], &arr[at], (size_t)(*n - at) * sizeof(*arr));
	arr[at] = b;
	(*n)++;
}

static void blocks_remove(hbm_block_t *arr, uint32_t *n, uint32_t at)
{
	memmove(&arr[at], &arr[at + 1], (size_t)(*n - at - 1) * sizeof(*arr));
	(*n)--;
}

/* Index of the first block with off > x (upper bound). */
static uint32_t blocks_upper(const hbm_block_t *arr, uint32_t n, uint64_t x)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (arr[mid].off <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The live allocation containing device offset off, or NULL. */
hbm_block_t *hbm_alloc_containing(hbm_t *h, uint64_t off)
{
	uint32_t i = blocks_upper(h->allocs, h->nallocs, off);

	if (!i)
		return NULL;
	hbm_block_t *a = &h->allocs[i - 1];
	return off - a->off < a->len ? a : NULL;
}

/* Free bytes, largest free block and free blocks of [lo, hi) (free blocks clipped to it). Under
 * lock. */
static void range_usage(const hbm_t *h, uint64_t lo, uint64_t hi, hbm_usage_t *u)
{
	*u = (hbm_usage_t){0};
	for (uint32_t i = 0; i < h->nfree; i++) {
		uint64_t b = GICE_MAX(h->free_list[i].off, lo);
		uint64_t end = GICE_MIN(h->free_list[i].off + h->free_list[i].len, hi);
		if (b >= end)
			continue;
		u->free += end - b;
		u->largest_free = GICE_MAX(u->largest_free, end - b);
		u->free_blocks++;
	}
}

void hbm_usage(hbm_t *h, uint64_t lo, uint64_t hi, hbm_usage_t *u)
{
	pthread_mutex_lock(&h->lock);
	range_usage(h, lo, GICE_MIN(hi, h->size), u);
	pthread_mutex_unlock(&h->lock);
}

/* ---- allocator ---- */

int hbm_alloc(hbm_t *h, uint64_t size, uint64_t align, uint64_t *off)
{
	return hbm_alloc_in(h, 0, UINT64_MAX, NULL, size, align, off);
}

int hbm_alloc_in(hbm_t *h, uint64_t lo, uint64_t hi, const char *pool, uint64_t size, uint64_t align,
		 uint64_t *off)
{
	uint64_t span;
	hbm_usage_t u;
	int rc = GICE_ERR_NO_MEMORY;

	if (!size || (align & (align - 1))) {
		gice_error("hbm", "alloc of %llu bytes aligned to %llu: size must be non-zero and the "
			   "alignment a power of two", (unsigned long long)size, (unsigned long long)align);
		return GICE_ERR_INVALID;
	}
	align = GICE_MAX(align, (uint64_t)HBM_MIN_ALIGN);
	if (size > UINT64_MAX - HBM_MIN_ALIGN)
		span = UINT64_MAX; /* cannot fit; reported below */
	else
		span = GICE_ALIGN_UP(size, HBM_MIN_ALIGN);

	pthread_mutex_lock(&h->lock);
	/* room for a split (one more free block) and the new allocation record */
	if (blocks_reserve(&h->free_list, &h->free_cap, h->nfree + 1) ||
	    blocks_reserve(&h->allocs, &h->alloc_cap, h->nallocs + 1)) {
		gice_error("hbm", "no host memory for allocator bookkeeping (%u free blocks, %u allocations)",
			   h->nfree, h->nallocs);
		goto out_unlock;
	}
	hi = GICE_MIN(hi, h->size);
	for (uint32_t i = 0; i < h->nfree; i++) {
		hbm_block_t b = h->free_list[i];
		uint64_t end = b.off + b.len; /* <= arena size: no overflow */
		uint64_t lim = GICE_MIN(end, hi), a;

		if (b.off > UINT64_MAX - (align - 1) || lo > UINT64_MAX - (align - 1))
			continue;
		/* the pool's part of the block: [max(b.off, lo), min(end, hi)) */
		a = GICE_ALIGN_UP(GICE_MAX(b.off, lo), align);
		if (a >= lim || span > lim - a)
			continue;
		/* split: [b.off, a) stays free, [a, a+span) taken, [a+span, end) stays free */
		if (a > b.off && a + span < end) {
			h->free_list[i].len = a - b.off;
			blocks_insert(h->free_list, &h->nfree, i + 1,
				      (hbm_block_t){.off = a + span, .len = end - a - span});
		} else if (a > b.off) {
			h->free_list[i].len = a - b.off;
		} else if (a + span < end) {
			h->free_list[i] = (hbm_block_t){.off = a + span, .len = end - a - span};
		} else {
			blocks_remove(h->free_list, &h->nfree, i);
		}
		blocks_insert(h->allocs, &h->nallocs, blocks_upper(h->allocs, h->nallocs, a),
			      (hbm_block_t){.off = a, .len = span, .size = size});
		atomic_store_explicit(&h->free_bytes, atomic_load_explicit(&h->free_bytes, memory_order_relaxed) - span,
				      memory_order_relaxed);
		*off = a;
		rc = GICE_OK;
		goto out_unlock;
	}
	range_usage(h, lo, hi, &u);
	if (pool)
		gice_error("hbm", "%s pool exhausted: alloc of %llu bytes aligned to %llu, %llu bytes free in the pool, "
			   "largest free block %llu (pool of %llu bytes)", pool, (unsigned long long)size,
			   (unsigned long long)align, (unsigned long long)u.free, (unsigned long long)u.largest_free,
			   (unsigned long long)(hi - GICE_MIN(lo, hi)));
	else
		gice_error("hbm", "out of device memory: alloc of %llu bytes aligned to %llu, %llu bytes free, "
			   "largest free block %llu", (unsigned long long)size, (unsigned long long)align,
			   (unsigned long long)u.free, (unsigned long long)u.largest_free);
out_unlock:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int hbm_free(hbm_t *h, uint64_t off)
{
	hbm_block_t a, *fl;
	uint32_t i, idx;
	uint64_t key;
	int rc = GICE_OK;

	pthread_mutex_lock(&h->lock);
	idx = blocks_upper(h->allocs, h->nallocs, off);
	if (!idx || h->allocs[idx - 1].off != off) {
		gice_error("hbm", "free of device offset 0x%llx: not the start of a live allocation",
			   (unsigned long long)off);
		rc = GICE_ERR_INVALID;
		goto out_unlock;
	}
	if (blocks_reserve(&h->free_list, &h->free_cap, h->nfree + 1)) {
		gice_error("hbm", "no host memory for the free list (%u blocks)", h->nfree);
		rc = GICE_ERR_NO_MEMORY;
		goto out_unlock;
	}
	a = h->allocs[idx - 1];
	key = hbm_region_overlapping(h, a.off, a.len);
	if (key) {
		gice_error("hbm", "free of allocation [0x%llx, +%llu) while region key 0x%016llx overlaps it: "
			   "deregister first", (unsigned long long)a.off, (unsigned long long)a.size,
			   (unsigned long long)key);
		rc = GICE_ERR_BUSY;
		goto out_unlock;
	}
	blocks_remove(h->allocs, &h->nallocs, idx - 1);

	/* insert [a.off, a.off+a.len) into the free list, merging with both neighbours */
	fl = h->free_list;
	i = blocks_upper(fl, h->nfree, a.off);
	int merge_prev = i > 0 && fl[i - 1].off + fl[i - 1].len == a.off;
	int merge_next = i < h->nfree && a.off + a.len == fl[i].off;
	if (merge_prev && merge_next) {
		fl[i - 1].len += a.len + fl[i].len;
		blocks_remove(fl, &h->nfree, i);
	} else if (merge_prev) {
		fl[i - 1].len += a.len;
	} else if (merge_next) {
		fl[i].off = a.off;
		fl[i].len += a.len;
	} else {
		blocks_insert(fl, &h->nfree, i, (hbm_block_t){.off = a.off, .len = a.len});
	}
	atomic_store_explicit(&h->free_bytes, atomic_load_explicit(&h->free_bytes, memory_order_relaxed) + a.len,
			      memory_order_relaxed);
out_unlock:
	pthread_mutex_unlock(&h->lock);
	return rc;
}
