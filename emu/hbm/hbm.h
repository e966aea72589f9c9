/* hbm.h: emulated device memory (HBM) of one device and its driver-side services:
 * a memfd-backed arena, an allocator, and the registration table that turns memory into
 * remotely accessible regions with random 64-bit keys.
 *
 * Addresses inside the arena are byte offsets from its base ("device offsets"); hbm_base() maps
 * them to pointers in this process. Registration is tracked at 64 KiB page granularity (like GPU
 * pinning); a region's bounds are the exact byte range registered.
 * Thread safety: alloc/free/register/deregister are set-up calls, serialized internally;
 * the translate calls are lock-free and safe against concurrent (de)registration.
 */
#ifndef GICE_HBM_H
#define GICE_HBM_H

#include <stdint.h>

#include "emu/common/common.h"
#include "emu/common/config.h"

#define HBM_PAGE_SIZE (64u * 1024u)
#define HBM_MIN_ALIGN 256u

typedef struct hbm hbm_t;

/* Arena of `bytes` (rounded up to a page; 0: GICE_HBM_BYTES) in a memfd named `name`. The
 * registration table has GICE_HBM_MAX_REGIONS slots. */
int hbm_create(uint64_t bytes, const char *name, hbm_t **out);
void hbm_destroy(hbm_t *h);
void *hbm_base(const hbm_t *h);
uint64_t hbm_size(const hbm_t *h);
int hbm_fd(const hbm_t *h);

/* Allocate size bytes aligned to align (power of two; raised to HBM_MIN_ALIGN). size 0 is
 * GICE_ERR_INVALID. GICE_ERR_NO_MEMORY when no free block fits; the logged message names the
 * request, the alignment, the free bytes and the largest free block. */
int hbm_alloc(hbm_t *h, uint64_t size, uint64_t align, uint64_t *off);
/* Free an allocation by its start offset; neighbours coalesce. GICE_ERR_BUSY if any registered
 * region overlaps it (deregister first); GICE_ERR_INVALID if off is not a live allocation. */
int hbm_free(hbm_t *h, uint64_t off);
uint64_t hbm_free_bytes(const hbm_t *h);

/* Pools: hbm_alloc restricted to device offsets [lo, hi) (a pool's share of the arena); the
 * GICE_ERR_NO_MEMORY message then names the pool, the request, the pool's free bytes and its
 * largest free block. hbm_alloc is the whole arena. */
int hbm_alloc_in(hbm_t *h, uint64_t lo, uint64_t hi, const char *pool, uint64_t size, uint64_t align,
		 uint64_t *off);
typedef struct {
	uint64_t free;         /* free bytes in the range */
	uint64_t largest_free; /* largest free block (clipped to the range) */
	uint32_t free_blocks;  /* free blocks: 1 - largest_free / free is the fragmentation */
} hbm_usage_t;
/* Usage of device offsets [lo, hi) now (takes the allocator lock: not for the run phase). */
void hbm_usage(hbm_t *h, uint64_t lo, uint64_t hi, hbm_usage_t *u);

/* Register [off, off+len) (must lie inside one live allocation: GICE_ERR_INVALID otherwise) and
 * return a fresh random non-zero key. GICE_ERR_OVERFLOW when the table is full. */
int hbm_register(hbm_t *h, uint64_t off, uint64_t len, uint64_t *key);
/* GICE_ERR_BAD_KEY if key is not registered. */
int hbm_deregister(hbm_t *h, uint64_t key);

/* Remote access check: bytes [roff, roff+len) of the region with this key.
 * GICE_ERR_BAD_KEY: no such key. GICE_ERR_OUT_OF_BOUNDS: the range leaves the region (overflow
 * safe). On success *off is the device offset of roff. Zero-length accesses need a valid key and
 * roff <= region length. */
int hbm_translate_key(const hbm_t *h, uint64_t key, uint64_t roff, uint64_t len, uint64_t *off);
/* Local source check: device bytes [off, off+len) must lie inside one registered region:
 * GICE_ERR_UNREGISTERED otherwise (also for ranges outside the arena). *key (may be NULL) gets
 * that region's key. */
int hbm_translate_local(const hbm_t *h, uint64_t off, uint64_t len, uint64_t *key);

/* GICE_HBM_* parameters (GICE_HBM_BYTES, GICE_HBM_MAX_REGIONS). */
extern const gice_param_t hbm_params[];

#endif
