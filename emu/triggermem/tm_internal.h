/* tm_internal.h: what the trigger memory files share (not for other modules): the structures
 * of the region that more than one of them touches (the region header, struct tm_shm_hdr, is
 * triggermem.c's alone), the process-local handle, and the request queue accessors. See
 * triggermem.c for the layout. */
#ifndef GICE_TM_INTERNAL_H
#define GICE_TM_INTERNAL_H

#include <assert.h>
#include <pthread.h>

#include "emu/triggermem/triggermem.h"

/* ---- shared structures ---- */

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
	_Atomic uint32_t awake;    /* threads that will look for the CT's work unasked (tm_doorbell_kick) */
	_Atomic uint32_t polling;  /* the sleeper waits in poll() (tm_doorbell_sleep_fd), not on seq */
	_Atomic uint32_t sent;     /* pieces of work published by kicks (tm_doorbell_kick) */
	_Atomic uint32_t pokes;    /* kicks that published nothing: look anyway (tm_doorbell_kick) */
	_Atomic uint64_t lease_ns; /* until then a thread comes back to the CT's work unasked
				    * (tm_doorbell_lease) */
	uint8_t pad[32];
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
	/* eventfd + 1 (0: none) a CT of this process sleeping in poll() is rung through; created by
	 * its first tm_doorbell_sleep_fd. Rings from other processes cannot reach it. */
	_Atomic int efd1[TM_MAX_CTS];
};

/* Set counter id's dirty bit for CT ct: 1 if this call set it (its caller owes the ring). */
int tm_dirty_set(tm_region_t *r, uint32_t ct, uint32_t id);

static inline struct tm_queue_hdr *queue_hdr(const tm_region_t *r, uint32_t ct)
{
	assert(ct < r->layout.n_cts);
	return (struct tm_queue_hdr *)(r->queues + (uint64_t)ct * r->queue_stride);
}

static inline struct tm_slot *queue_slots(const tm_region_t *r, uint32_t ct)
{
	return (struct tm_slot *)(queue_hdr(r, ct) + 1);
}

#endif
