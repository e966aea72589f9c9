/* hbm.c: emulated device memory: memfd arena, first-fit allocator, registration table.
 *
 * Set-up calls (alloc, free, register, deregister) run under h->lock. The translate calls take no
 * lock; they read the registration state through atomics and validate what they read:
 *
 *  - A region lives in a slot {key, off, len}. A writer publishes a slot by storing off/len and
 *    then the key (release); it retires it by storing key = 0. A reader loads the key (acquire),
 *    then off/len (acquire), then the key again: if both loads saw the key it was
 *    looking for, off/len belong to that key (seqlock with the key as the sequence word). A
 *    positive answer is therefore always correct on its own.
 *  - Finding the slot goes through an open-addressing hash of slot indices (by key) or the page
 *    table (by device offset). Those indexes move while a writer works, so a reader may miss; a
 *    negative answer is only returned after checking that the generation counter h->gen was even
 *    and unchanged across the lookup (a seqlock over the indexes), otherwise the lookup is
 *    retried. Writers keep the odd-generation window short (no syscalls, no logging inside).
 */
#include "emu/hbm/hbm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

const gice_param_t hbm_params[] = {
	{"GICE_HBM_BYTES", "256m", "device memory (HBM arena) per device, rounded up to 64 KiB",
	 GICE_PARAM_SIZE, 1ull << 20, 64ull << 30},
	{"GICE_HBM_MAX_REGIONS", "1024", "registration table slots per device (registered regions)",
	 GICE_PARAM_U64, 1, 1u << 20},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* ---- generation seqlock over the indexes ----
 * No atomic_thread_fence (TSan does not model fences): every store a writer makes inside the
 * window is a release store and every load a reader makes of it is an acquire load, so a reader
 * that sees any store made after the odd generation also sees the odd generation (or a later
 * one) when it re-reads h->gen; and acquire loads keep that re-read after them. */

static void gen_begin(hbm_t *h)
{
	uint64_t g = atomic_load_explicit(&h->gen, memory_order_relaxed);

	/* the release stores that follow order this one before them */
	atomic_store_explicit(&h->gen, g + 1, memory_order_relaxed);
}

static void gen_end(hbm_t *h)
{
	uint64_t g = atomic_load_explicit(&h->gen, memory_order_relaxed);

	/* release: index stores above are visible to whoever sees the even generation */
	atomic_store_explicit(&h->gen, g + 1, memory_order_release);
}

/* Reader: true when a negative lookup that started at generation g1 may be trusted. */
static int gen_stable(const hbm_t *h, uint64_t g1)
{
	/* the lookup's loads were acquire loads: this re-read cannot move before them */
	return !(g1 & 1) && atomic_load_explicit(&((hbm_t *)h)->gen, memory_order_relaxed) == g1;
}

/* ---- slot read (seqlock on the key) ---- */

/* Snapshot slot i; returns its key (0 if free or changed under us). The writer stores off/len
 * with release after retiring the old key (key = 0): reading a new off or len (acquire) makes
 * the retirement visible to the key re-read, which the acquire loads also keep after them. */
static uint64_t slot_read(const hbm_slot_t *s, uint64_t *off, uint64_t *len)
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
static int range_inside(uint64_t off, uint64_t len, uint64_t roff, uint64_t rlen)
{
	return off >= roff && off - roff <= rlen && len <= rlen - (off - roff);
}

static uint32_t key_hash(const hbm_t *h, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & h->hash_mask;
}

/* ---- arena ---- */

/* The process-local tables and the handle itself (create's error path and destroy). */
static void free_tables(hbm_t *h)
{
	free(h->allocs);
	free(h->free_list);
	free(h->page_cnt);
	free((void *)h->page);
	free((void *)h->hash);
	free(h->slot_free);
	free(h->slots);
	free(h);
}

int hbm_create(uint64_t bytes, const char *name, hbm_t **out)
{
	uint64_t max_regions, hash_size = 1;
	hbm_t *h;
	int rc;

	if (!bytes) {
		rc = gice_param_u64(&hbm_params[0], &bytes);
		if (rc)
			return rc;
	}
	if (bytes > UINT64_MAX - HBM_PAGE_SIZE || !out) {
		gice_error("hbm", "arena size %llu is not valid", (unsigned long long)bytes);
		return GICE_ERR_INVALID;
	}
	rc = gice_param_u64(&hbm_params[1], &max_regions);
	if (rc)
		return rc;
	while (hash_size < 2 * max_regions)
		hash_size <<= 1;

	h = calloc(1, sizeof(*h));
	if (!h)
		return GICE_ERR_NO_MEMORY;
	h->size = GICE_ALIGN_UP(bytes, HBM_PAGE_SIZE);
	h->npages = h->size / HBM_PAGE_SIZE;
	h->max_regions = (uint32_t)max_regions;
	h->hash_mask = (uint32_t)hash_size - 1;
	rc = GICE_ERR_NO_MEMORY;
	h->slots = calloc(max_regions, sizeof(*h->slots));
	h->slot_free = calloc(max_regions, sizeof(*h->slot_free));
	h->hash = calloc(hash_size, sizeof(*h->hash));
	h->page = calloc(h->npages, sizeof(*h->page));
	h->page_cnt = calloc(h->npages, sizeof(*h->page_cnt));
	h->free_cap = h->alloc_cap = 16;
	h->free_list = calloc(h->free_cap, sizeof(*h->free_list));
	h->allocs = calloc(h->alloc_cap, sizeof(*h->allocs));
	if (!h->slots || !h->slot_free || !h->hash || !h->page || !h->page_cnt || !h->free_list ||
	    !h->allocs) {
		gice_error("hbm", "no host memory for the tables of a %llu-byte arena with %u regions",
			   (unsigned long long)h->size, h->max_regions);
		goto err_free_tables;
	}
	/* lowest slot on top of the stack: keeps slot_hw (the scan bound) small */
	for (uint32_t i = 0; i < h->max_regions; i++)
		h->slot_free[i] = h->max_regions - 1 - i;
	h->nslot_free = h->max_regions;

	h->fd = memfd_create(name ? name : "gice-hbm", MFD_CLOEXEC);
	if (h->fd < 0) {
		gice_error("hbm", "memfd_create(\"%s\") failed: %m", name ? name : "gice-hbm");
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_tables;
	}
	if (ftruncate(h->fd, (off_t)h->size) < 0) {
		gice_error("hbm", "ftruncate of memfd \"%s\" to %llu bytes failed: %m", name ? name : "gice-hbm",
			   (unsigned long long)h->size);
		goto err_close_fd;
	}
	h->base = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->base == MAP_FAILED) {
		gice_error("hbm", "mmap of %llu bytes of memfd \"%s\" failed: %m", (unsigned long long)h->size,
			   name ? name : "gice-hbm");
		goto err_close_fd;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->free_list[0] = (hbm_block_t){.off = 0, .len = h->size};
	h->nfree = 1;
	atomic_init(&h->free_bytes, h->size);
	*out = h;
	return GICE_OK;

err_close_fd:
	close(h->fd);
err_free_tables:
	free_tables(h);
	return rc;
}

void hbm_destroy(hbm_t *h)
{
	if (!h)
		return;
	pthread_mutex_destroy(&h->lock);
	munmap(h->base, h->size);
	close(h->fd);
	free_tables(h);
}

void *hbm_base(const hbm_t *h) { return h->base; }
uint64_t hbm_size(const hbm_t *h) { return h->size; }
int hbm_fd(const hbm_t *h) { return h->fd; }

uint64_t hbm_free_bytes(const hbm_t *h)
{
	return atomic_load_explicit(&((hbm_t *)h)->free_bytes, memory_order_relaxed);
}

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
static hbm_block_t *alloc_containing(hbm_t *h, uint64_t off)
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

/* Any live region overlapping [off, off+len)? Returns its key (0: none). Under lock. */
static uint64_t region_overlapping(hbm_t *h, uint64_t off, uint64_t len)
{
	uint32_t hw = atomic_load_explicit(&h->slot_hw, memory_order_relaxed);

	for (uint32_t i = 0; i < hw; i++) {
		hbm_slot_t *s = &h->slots[i];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		uint64_t ro = atomic_load_explicit(&s->off, memory_order_relaxed);
		uint64_t rl = atomic_load_explicit(&s->len, memory_order_relaxed);

		if (k && ro < off + len && off < ro + rl)
			return k;
	}
	return 0;
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
	key = region_overlapping(h, a.off, a.len);
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

/* ---- registration ---- */

/* Slot holding key, via the hash; -1 if absent. Lock-free; a miss is only trustworthy under a
 * stable generation (caller checks). */
static int64_t hash_find(const hbm_t *h, uint64_t key, uint64_t *off, uint64_t *len)
{
	uint32_t i = key_hash(h, key);

	for (uint32_t n = 0; n <= h->hash_mask; n++, i = (i + 1) & h->hash_mask) {
		uint32_t e = atomic_load_explicit(&h->hash[i], memory_order_acquire);

		if (e == HBM_HASH_EMPTY)
			return -1;
		if (slot_read(&h->slots[e - 1], off, len) == key)
			return e - 1;
	}
	return -1;
}

/* Hash insert/remove: under lock, inside a generation window. */
static void hash_insert(hbm_t *h, uint64_t key, uint32_t slot)
{
	uint32_t i = key_hash(h, key);

	while (atomic_load_explicit(&h->hash[i], memory_order_relaxed) != HBM_HASH_EMPTY)
		i = (i + 1) & h->hash_mask;
	atomic_store_explicit(&h->hash[i], slot + 1, memory_order_release);
}

/* Linear-probing delete with backward shift (no tombstones): readers racing with the shift may
 * miss, which the generation check turns into a retry. */
static void hash_remove(hbm_t *h, uint64_t key, uint32_t slot)
{
	uint32_t i, j, e;

	for (i = key_hash(h, key); atomic_load_explicit(&h->hash[i], memory_order_relaxed) != slot + 1;
	     i = (i + 1) & h->hash_mask)
		;
	j = i;
	for (;;) {
		j = (j + 1) & h->hash_mask;
		e = atomic_load_explicit(&h->hash[j], memory_order_relaxed);
		if (e == HBM_HASH_EMPTY)
			break;
		uint32_t home = key_hash(h, atomic_load_explicit(&h->slots[e - 1].key, memory_order_relaxed));
		/* e may move to the hole at i unless its home lies cyclically in (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		atomic_store_explicit(&h->hash[i], e, memory_order_release);
		i = j;
	}
	atomic_store_explicit(&h->hash[i], HBM_HASH_EMPTY, memory_order_release);
}

/* Page p's count changed; set its entry. `only` is the slot known to be the single region on
 * the page (register), or -1 to find it by scanning (deregister). Under lock. */
static void page_update(hbm_t *h, uint64_t p, int64_t only)
{
	uint32_t e = HBM_PAGE_NONE;

	if (h->page_cnt[p] > 1) {
		e = HBM_PAGE_MULTI;
	} else if (h->page_cnt[p] == 1 && only >= 0) {
		e = (uint32_t)only + 1;
	} else if (h->page_cnt[p] == 1) {
		uint64_t lo = p * HBM_PAGE_SIZE, hw = atomic_load_explicit(&h->slot_hw, memory_order_relaxed);

		for (uint32_t i = 0; i < hw; i++) {
			hbm_slot_t *s = &h->slots[i];
			uint64_t ro = atomic_load_explicit(&s->off, memory_order_relaxed);
			uint64_t rl = atomic_load_explicit(&s->len, memory_order_relaxed);

			if (atomic_load_explicit(&s->key, memory_order_relaxed) && ro < lo + HBM_PAGE_SIZE &&
			    lo < ro + rl) {
				e = i + 1;
				break;
			}
		}
	}
	atomic_store_explicit(&h->page[p], e, memory_order_release);
}

int hbm_register(hbm_t *h, uint64_t off, uint64_t len, uint64_t *key)
{
	hbm_block_t *a;
	uint64_t k, o, l;
	uint32_t slot;
	int rc = GICE_OK;

	pthread_mutex_lock(&h->lock);
	a = alloc_containing(h, off);
	if (!len || !a || !range_inside(off, len, a->off, a->size)) {
		gice_error("hbm", "register of [0x%llx, +%llu): not inside one live allocation%s",
			   (unsigned long long)off, (unsigned long long)len, len ? "" : " (zero length)");
		rc = GICE_ERR_INVALID;
		goto out_unlock;
	}
	if (!h->nslot_free) {
		gice_error("hbm", "register of [0x%llx, +%llu): all %u region slots in use (GICE_HBM_MAX_REGIONS)",
			   (unsigned long long)off, (unsigned long long)len, h->max_regions);
		rc = GICE_ERR_OVERFLOW;
		goto out_unlock;
	}
	do /* fresh, non-zero, not in use */
		k = gice_random_u64();
	while (!k || hash_find(h, k, &o, &l) >= 0);
	slot = h->slot_free[--h->nslot_free];

	gen_begin(h);
	/* the slot's key is 0 (free): release orders that retirement before the new off/len, so a
	 * reader still holding the old key fails its re-check */
	atomic_store_explicit(&h->slots[slot].off, off, memory_order_release);
	atomic_store_explicit(&h->slots[slot].len, len, memory_order_release);
	/* publish: off/len before the key */
	atomic_store_explicit(&h->slots[slot].key, k, memory_order_release);
	if (slot + 1 > atomic_load_explicit(&h->slot_hw, memory_order_relaxed))
		atomic_store_explicit(&h->slot_hw, slot + 1, memory_order_release);
	hash_insert(h, k, slot);
	for (uint64_t p = off / HBM_PAGE_SIZE; p <= (off + len - 1) / HBM_PAGE_SIZE; p++) {
		h->page_cnt[p]++;
		page_update(h, p, slot);
	}
	gen_end(h);
	*key = k;
out_unlock:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int hbm_deregister(hbm_t *h, uint64_t key)
{
	uint64_t off, len;
	int64_t slot;
	int rc = GICE_OK;

	pthread_mutex_lock(&h->lock);
	slot = key ? hash_find(h, key, &off, &len) : -1;
	if (slot < 0) {
		gice_error("hbm", "deregister of key 0x%016llx: no such region", (unsigned long long)key);
		rc = GICE_ERR_BAD_KEY;
		goto out_unlock;
	}
	gen_begin(h);
	/* retire the key first: readers' re-checks fail from here on */
	atomic_store_explicit(&h->slots[slot].key, 0, memory_order_release);
	hash_remove(h, key, (uint32_t)slot);
	for (uint64_t p = off / HBM_PAGE_SIZE; p <= (off + len - 1) / HBM_PAGE_SIZE; p++) {
		h->page_cnt[p]--;
		page_update(h, p, -1);
	}
	gen_end(h);
	h->slot_free[h->nslot_free++] = (uint32_t)slot;
out_unlock:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int hbm_translate_key(const hbm_t *h, uint64_t key, uint64_t roff, uint64_t len, uint64_t *off)
{
	uint64_t g, ro, rl;

	if (gice_unlikely(!key))
		return GICE_ERR_BAD_KEY;
	for (;;) {
		g = atomic_load_explicit(&((hbm_t *)h)->gen, memory_order_acquire);
		if (gice_likely(hash_find(h, key, &ro, &rl) >= 0)) {
			if (roff > rl || len > rl - roff)
				return GICE_ERR_OUT_OF_BOUNDS;
			*off = ro + roff;
			return GICE_OK;
		}
		if (gen_stable(h, g))
			return GICE_ERR_BAD_KEY;
		gice_cpu_relax();
	}
}

/* Scan every possibly-live slot for one containing [off, off+len). */
static uint64_t scan_regions(const hbm_t *h, uint64_t off, uint64_t len)
{
	uint32_t hw = atomic_load_explicit(&((hbm_t *)h)->slot_hw, memory_order_acquire);
	uint64_t ro, rl, k;

	for (uint32_t i = 0; i < hw; i++) {
		k = slot_read(&h->slots[i], &ro, &rl);
		if (k && range_inside(off, len, ro, rl))
			return k;
	}
	return 0;
}

int hbm_translate_local(const hbm_t *h, uint64_t off, uint64_t len, uint64_t *key)
{
	uint64_t g, ro, rl, k;
	uint32_t e;

	if (gice_unlikely(off >= h->size || len > h->size - off))
		return GICE_ERR_UNREGISTERED;
	for (;;) {
		g = atomic_load_explicit(&((hbm_t *)h)->gen, memory_order_acquire);
		e = atomic_load_explicit(&h->page[off / HBM_PAGE_SIZE], memory_order_acquire);
		k = 0;
		if (gice_likely(e != HBM_PAGE_NONE && e != HBM_PAGE_MULTI)) {
			k = slot_read(&h->slots[e - 1], &ro, &rl);
			if (k && !range_inside(off, len, ro, rl))
				k = 0;
		}
		/* several regions on the page, or a zero-length access at a region's page-aligned end */
		if (!k && (e == HBM_PAGE_MULTI || !len))
			k = scan_regions(h, off, len);
		if (gice_likely(k)) {
			if (key)
				*key = k;
			return GICE_OK;
		}
		if (gen_stable(h, g))
			return GICE_ERR_UNREGISTERED;
		gice_cpu_relax();
	}
}
