/* gice-watchdog-demo: a small "training framework" with its own watchdog, to be tested with gice's
 * fault injection the way a user would (docs/faults.md, tests/test_watchdog_demo.sh).
 *
 * Each rank runs --steps steps. A step is a ring exchange: a put with a signal to the next rank,
 * then a wait for the previous rank's signal, with a per-step deadline (--step-ms). The
 * framework's watchdog is the deadline plus gice's error callback: when a step misses its
 * deadline, or gice reports a lost peer, it prints one verdict line and exits 3:
 *   watchdog: rank R step S: DEAD PEER: rank P (reason): gice's diagnostic
 *   watchdog: rank R step S: HUNG PEER: ...
 *   watchdog: rank R step S: STALLED: no signal from rank P within D ms (status); most ...
 * naming the peer and the reason (gice's diagnostic), and, for a slow step, the link it blames
 * from gice_device_peer_stats (the peer this rank retransmitted most to). A run that ends well
 * prints "watchdog: rank R: N steps ok" and, per peer, what was lost and retransmitted on the
 * way (a lossy link is degraded, not dead). */
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gice.h"

#define MIB (1024u * 1024u)

static _Atomic int claimed, lost; /* gice told us of a lost peer: lost once lost_text is written */
static char lost_text[512];

/* gice's error callback (on gice's watchdog thread, or on ours below): remember the first peer
 * found dead or hung (a timeout is the step deadline's business, below). */
static void on_error(const gice_error_info_t *info, void *arg)
{
	(void)arg;
	if ((info->status != GICE_ERR_PEER_DEAD && info->status != GICE_ERR_PEER_HUNG) || atomic_exchange(&claimed, 1))
		return;
	snprintf(lost_text, sizeof(lost_text), "%s PEER: rank %d (%s): %s",
		 info->status == GICE_ERR_PEER_DEAD ? "DEAD" : "HUNG", (int)info->peer_rank,
		 info->reason ? info->reason : gice_status_name(info->status), info->message ? info->message : "");
	atomic_store(&lost, 1);
}

struct shared {
	uint64_t key;
	uint32_t sig, pad;
};

/* The peer this device retransmitted most to (its most suspect link), or -1. */
static int most_retransmitted(gice_device_t *d, uint32_t size, uint64_t *retx)
{
	int worst = -1;

	*retx = 0;
	for (uint32_t r = 0; r < size; r++) {
		gice_peer_stats_t ps;
		if (gice_device_peer_stats(d, gice_device_id_of(r, 0), &ps) == GICE_OK && ps.retransmits > *retx) {
			*retx = ps.retransmits;
			worst = (int)r;
		}
	}
	return worst;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"steps", required_argument, 0, 's'},
					   {"step-ms", required_argument, 0, 'm'},
					   {"bytes", required_argument, 0, 'b'},
					   {0, 0, 0, 0}};
	long steps = 200, step_ms = 2000, bytes = 4096;
	gice_device_t *d;
	void *buf;
	struct shared me, *all;
	gice_counter_t done;
	gice_conn_t next;
	int ch;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		long *v = ch == 's' ? &steps : ch == 'm' ? &step_ms : ch == 'b' ? &bytes : NULL;
		if (!v || (*v = strtol(optarg, NULL, 10)) <= 0) {
			fprintf(stderr, "usage: gice-watchdog-demo [--steps N] [--step-ms MS] [--bytes B]\n");
			return 2;
		}
	}
	if (bytes > (long)(MIB / 2))
		bytes = MIB / 2;
	int rc = gice_init();
	if (rc || (rc = gice_set_error_callback(on_error, NULL)) || (rc = gice_device_open(NULL, &d))) {
		fprintf(stderr, "gice-watchdog-demo: set-up failed: %s\n", gice_status_name(rc));
		return 1;
	}
	uint32_t rank = gice_rank(), size = gice_world_size();
	all = calloc(size, sizeof(*all));
	if (!all)
		rc = GICE_ERR_NO_MEMORY;
	if (rc || (rc = gice_mem_alloc(d, MIB, &buf)) || (rc = gice_mem_register(d, buf, MIB, &me.key)) ||
	    (rc = gice_counter_alloc(d, &me.sig)) || (rc = gice_counter_alloc(d, &done)) ||
	    (rc = gice_allgather(&me, sizeof(me), all)) ||
	    (rc = gice_conn_open(d, gice_device_id_of((rank + 1) % size, 0), NULL, &next))) {
		fprintf(stderr, "gice-watchdog-demo: rank %u: set-up failed: %s\n", rank, gice_status_name(rc));
		return 1;
	}
	for (long s = 1; s <= steps; s++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = next, .local = buf, .bytes = (uint64_t)bytes,
				.rkey = all[(rank + 1) % size].key, .value = 1, .signal = all[(rank + 1) % size].sig,
				.signal_flags = GICE_SIGNAL_ADD, .completion = done};
		uint32_t prev = (rank + size - 1) % size;
		rc = gice_post(d, &op);
		if (rc == GICE_OK)
			rc = gice_counter_wait(d, me.sig, GICE_CMP_GE, (uint64_t)s, (uint64_t)step_ms, NULL);
		if (rc == GICE_OK)
			rc = gice_counter_wait(d, done, GICE_CMP_GE, (uint64_t)s, (uint64_t)step_ms, NULL);
		if (rc != GICE_OK || atomic_load(&lost)) {
			gice_error_info_t info;
			uint64_t retx;
			int worst = most_retransmitted(d, size, &retx);
			/* gice records the first error before any wait wakes: the reason is there */
			if (gice_job_error(&info) == GICE_OK && info.status != GICE_OK && info.peer_rank != UINT32_MAX)
				on_error(&info, NULL);
			while (atomic_load(&claimed) && !atomic_load(&lost))
				sched_yield(); /* the callback is writing the text */
			if (atomic_load(&lost))
				printf("watchdog: rank %u step %ld: %s\n", rank, s, lost_text);
			else if (worst >= 0)
				printf("watchdog: rank %u step %ld: STALLED: no signal from rank %u within %ld ms (%s); "
				       "most retransmitted link: %u->%d (%llu packets)\n",
				       rank, s, prev, step_ms, gice_status_name(rc), rank, worst, (unsigned long long)retx);
			else
				printf("watchdog: rank %u step %ld: STALLED: no signal from rank %u within %ld ms (%s); "
				       "no link of this rank lost packets\n", rank, s, prev, step_ms, gice_status_name(rc));
			fflush(stdout);
			free(all);
			return 3; /* as a framework's watchdog: exit, the devices with the process */
		}
	}
	printf("watchdog: rank %u: %ld steps ok", rank, steps);
	for (uint32_t r = 0; r < size; r++) {
		gice_peer_stats_t ps;
		if (r != rank && gice_device_peer_stats(d, gice_device_id_of(r, 0), &ps) == GICE_OK && ps.tx_pkts)
			printf("; to rank %u: %llu packets, %llu lost, %llu retransmitted", r, (unsigned long long)ps.tx_pkts,
			       (unsigned long long)ps.fault_drops, (unsigned long long)ps.retransmits);
	}
	printf("\n");
	fflush(stdout);
	gice_barrier();
	gice_device_close(d);
	gice_finalize();
	free(all);
	return 0;
}
