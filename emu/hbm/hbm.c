/* hbm.c: emulated device memory: the memfd arena and its tables (hbm_alloc.c allocates in it,
 * hbm_reg.c registers and translates).
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
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/hbm/hbm_internal.h"

const gice_param_t hbm_params[] = {
	{"GICE_HBM_BYTES", "256m", "device memory (HBM arena) per device, rounded up to 64 KiB",
	 GICE_PARAM_SIZE, 1ull << 20, 64ull << 30},
	{"GICE_HBM_MAX_REGIONS", "1024", "registration table slots per device (registered regions)",
	 GICE_PARAM_U64, 1, 1u << 20},
	{NULL, NULL, NULL, 0, 0, 0},
};

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
