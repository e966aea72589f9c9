/* hbm_reg.c: registration of device memory as remotely accessible regions with random 64-bit
 * keys (slots, a key hash and a page table, changed under the lock) and the lock-free
 * translations a CT runs per packet (hbm_translate_key, hbm_translate_local): see hbm.c for how
 * they stay correct while regions come and go. */
#include <stdlib.h>
#include <string.h>

#include "emu/hbm/hbm_internal.h"

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
	a = hbm_alloc_containing(h, off);
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

/* Any live region overlapping [off, off+len)? Returns its key (0: none). Under lock. */
uint64_t hbm_region_overlapping(hbm_t *h, uint64_t off, uint64_t len)
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
