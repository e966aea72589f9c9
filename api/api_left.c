/* api_left.c: what a device abandoned with a thread stuck in a call that does not return
 * (device_abandon: libfabric's shm spinning on a lock of a dead process) may still touch when
 * that call returns after all: the trigger memory of its peers (its link kicks and nudges
 * them), their memory (the NVLink plane copies into it) and their endpoints (shm's progress
 * touches an in-process peer's). Those are its peers' to release: in-process devices closing
 * later (their trigger memory, endpoint and memory) and gice_finalize (other ranks' trigger
 * memory and memory mapped here). From the first abandoned device on, they are left to the
 * process's exit, as the device itself is, and kept reachable here, so that a leak checker sees
 * them held, not lost. */
#include <stdatomic.h>
#include <stdlib.h>

#include "api/api_internal.h"

static struct {
	pthread_mutex_t lock;
	_Atomic int abandoned; /* sticky: the stuck thread may return at any time */
	void **kept;
	size_t n, cap;
} left = {.lock = PTHREAD_MUTEX_INITIALIZER};

void api_left_abandoned(void) { atomic_store_explicit(&left.abandoned, 1, memory_order_release); }

int api_left_keep(void *p)
{
	if (!atomic_load_explicit(&left.abandoned, memory_order_acquire))
		return 0;
	if (!p)
		return 1;
	pthread_mutex_lock(&left.lock);
	if (left.n == left.cap) {
		size_t cap = left.cap ? 2 * left.cap : 16;
		void **grown = realloc(left.kept, cap * sizeof(*grown));
		if (grown) {
			left.kept = grown;
			left.cap = cap;
		}
	}
	if (left.n < left.cap) /* else unreachable from here, but still not released */
		left.kept[left.n++] = p;
	pthread_mutex_unlock(&left.lock);
	return 1;
}
