/* Description: faults aimed at a collective operation (issue 14; the @collN windows of
 * docs/faults.md), in jobs of three forked ranks running a real ring allreduce over the network
 * path (tcp, GICE_PLANE=net), each call checked exactly:
 * - kill_rank=2@coll4: rank 2 dies at the start of its 4th allreduce; allreduces 1-3 are exact
 *   everywhere, the survivors' 4th fails with GICE_ERR_PEER_DEAD and the watchdog names rank 2;
 * - hang_rank=1@coll3: rank 1's devices stop at the start of its 3rd; the survivors' 3rd fails
 *   with GICE_ERR_PEER_HUNG naming rank 1 (rank 1 stays alive until they have seen it);
 * - corrupt_msg=1@coll3+1,link=0->1: the first chunk rank 0 sends rank 1 in the 3rd allreduce
 *   is corrupted, once: rank 0's corruptions towards rank 1 go from 0 to 1 in its 3rd allreduce,
 *   rank 1 counts one CRC failure from rank 0, the chunk is sent again and every result stays
 *   exact;
 * - gice_faults_set(dev, "kill_rank=0@coll2") on the rank itself: its 2nd collective from the
 *   call kills it. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"

enum { NRANKS = 3, NCOLL = 6, COUNT = 4096 }; /* int32: 16 KiB, 4 chunks of 4 KiB per rank */
enum mode { M_KILL, M_HANG, M_CORRUPT };

static enum mode mode; /* set by the test before the ranks fork */

/* What a rank saw: allreduces that completed and were exact, the first failure, the device's
 * first error, and its corruptions towards rank 1 after each allreduce. */
struct seen {
	int done, rc;
	gice_error_info_t err;
	uint64_t corrupts[NCOLL + 1];
};

static int coll_rank(int rank, int size)
{
	gice_device_t *d;
	gice_stream_t *s;
	gice_team_t *world;
	uint64_t a_off, b_off;
	struct seen v = {0};
	int barrier[NRANKS];

	setenv("GICE_ALGO", "ring", 1);
	setenv("GICE_CHUNK_BYTES", "4k", 1);
	setenv("GICE_COLL_SCRATCH_BYTES", "64k", 1);
	FAILIF(gice_init(), "gice_init");
	gice_device_attr_t attr = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
	FAILIF(gice_device_open(&attr, &d) || gice_stream_create(d, &s), "device");
	FAILIF(gice_sym_init(1u << 20), "gice_sym_init");
	world = gice_team_world();
	FAILIF(gice_coll_init(world), "gice_coll_init");
	FAILIF(gice_sym_alloc(COUNT * 4, &a_off) || gice_sym_alloc(COUNT * 4, &b_off), "alloc");
	for (int i = 1; i <= NCOLL; i++) {
		int32_t *a = gice_sym_ptr(d, a_off), *b = gice_sym_ptr(d, b_off);
		for (int j = 0; j < COUNT; j++)
			a[j] = rank * 1000 + j + i;
		/* the sync's own bound is far above the watchdog's: the watchdog names the culprit */
		if ((v.rc = gice_coll_allreduce(s, world, a_off, b_off, COUNT, GICE_INT32, GICE_RED_SUM)) ||
		    (v.rc = gice_stream_sync(s, (uint64_t)test_scaled(30000))))
			break;
		for (int j = 0; j < COUNT; j++)
			FAILIF(b[j] != 1000 * size * (size - 1) / 2 + size * (j + i), "allreduce %d: element %d is %d", i,
			       j, b[j]);
		v.done = i;
		gice_peer_stats_t ps;
		FAILIF(gice_device_peer_stats(d, gice_device_id_of(1, 0), &ps), "peer stats");
		v.corrupts[i] = ps.fault_corrupts;
	}
	gice_device_error(d, &v.err);
	fprintf(stderr, "rank %d: %d allreduces exact, then %s; first error: %s\n", rank, v.done,
		gice_status_name(v.rc), v.err.message ? v.err.message : "none");
	switch (mode) {
	case M_KILL:
		FAILIF(rank == 2, "rank 2 was not killed at its 4th allreduce (%d done)", v.done);
		/* its 4th, or its 3rd when rank 2 died before acknowledging that one's last packets:
		 * a device stops whole, its ACKs with it */
		FAILIF(v.done < 2 || v.done > 3 || v.rc != GICE_ERR_PEER_DEAD, "allreduce %d ended %s", v.done + 1,
		       gice_status_name(v.rc));
		FAILIF(v.err.status != GICE_ERR_PEER_DEAD || v.err.peer_rank != 2, "the watchdog named %s of rank %u",
		       gice_status_name(v.err.status), v.err.peer_rank);
		return 0; /* the job lost a rank: no collective teardown */
	case M_HANG:
		/* rank 1 stays alive until the survivors have seen it hang (the bootstrap still works) */
		if (rank != 1) {
			/* the 3rd, or the 2nd when rank 1 stopped before acknowledging its last packets
			 * (seen on a quiet machine: rank 1 had all it needed, its delayed ACK had not left) */
			FAILIF(v.done < 1 || v.done > 2 || v.rc != GICE_ERR_PEER_HUNG, "allreduce %d ended %s",
			       v.done + 1, gice_status_name(v.rc));
			FAILIF(v.err.status != GICE_ERR_PEER_HUNG || v.err.peer_rank != 1,
			       "the watchdog named %s of rank %u", gice_status_name(v.err.status), v.err.peer_rank);
		}
		FAILIF(gice_allgather(&rank, sizeof(rank), barrier), "barrier");
		FAILIF(rank == 1 && (v.done != 2 || v.rc == GICE_OK), "rank 1 went on after its hang (%d done)", v.done);
		return 0;
	case M_CORRUPT:
		FAILIF(v.done != NCOLL, "allreduce %d ended %s", v.done + 1, gice_status_name(v.rc));
		/* the sender's count: the window is its own collectives (the receiver may be one
		 * behind: its 2nd can end after the sender's 3rd began) */
		for (int i = 1; i <= NCOLL; i++)
			FAILIF(v.corrupts[i] != (uint64_t)(rank == 0 && i >= 3), "after allreduce %d: %llu packets to rank 1 "
			       "corrupted", i, (unsigned long long)v.corrupts[i]);
		if (rank == 1) {
			gice_peer_stats_t ps;
			FAILIF(gice_device_peer_stats(d, gice_device_id_of(0, 0), &ps), "peer stats");
			FAILIF(ps.rx_csum_bad != 1, "%llu CRC failures from rank 0", (unsigned long long)ps.rx_csum_bad);
		}
		break;
	}
	FAILIF(gice_sym_fini(), "gice_sym_fini");
	gice_stream_destroy(s);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

static void run(enum mode m, const char *faults, int *st)
{
	static char spec[128];
	const char *env[] = {spec, "GICE_PLANE=net", "GICE_TIMEOUT_MS=2000", NULL};

	mode = m;
	snprintf(spec, sizeof(spec), "GICE_FAULTS=%s", faults);
	run_job(NRANKS, NRANKS, coll_rank, "tcp", env, st, NULL);
}

START_TEST(kill_at_a_collective_step)
{
	int st[NRANKS];

	run(M_KILL, "kill_rank=2@coll4", st);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
	ck_assert_int_eq(st[2], 128 + SIGKILL);
}
END_TEST

START_TEST(hang_at_a_collective_step)
{
	int st[NRANKS];

	run(M_HANG, "hang_rank=1@coll3", st);
	for (int r = 0; r < NRANKS; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d", r, st[r]);
}
END_TEST

START_TEST(corrupt_the_chunk_of_a_collective_step)
{
	int st[NRANKS];

	run(M_CORRUPT, "corrupt_msg=1@coll3+1,link=0->1", st);
	for (int r = 0; r < NRANKS; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d", r, st[r]);
}
END_TEST

/* gice_faults_set(dev, "kill_rank=0@coll2") on the rank itself (a job of one): the 2nd
 * collective from the call kills it, the 1st completes; counted from the call, not the open. */
static int self_rank(int rank, int size)
{
	gice_device_t *d;
	gice_stream_t *s;
	uint64_t a_off;

	setenv("GICE_COLL_SCRATCH_BYTES", "64k", 1);
	FAILIF(gice_init(), "gice_init");
	FAILIF(gice_device_open(NULL, &d) || gice_stream_create(d, &s), "device");
	FAILIF(gice_sym_init(1u << 20) || gice_coll_init(gice_team_world()) || gice_sym_alloc(4096, &a_off), "sym");
	for (int i = 0; i < 3; i++) { /* before the call: not counted */
		FAILIF(gice_coll_allreduce(s, gice_team_world(), a_off, a_off, 16, GICE_INT32, GICE_RED_SUM) ||
			       gice_stream_sync(s, 0),
		       "allreduce %d", i);
	}
	FAILIF(gice_faults_set(d, "kill_rank=0@coll2"), "gice_faults_set");
	FAILIF(gice_coll_allreduce(s, gice_team_world(), a_off, a_off, 16, GICE_INT32, GICE_RED_SUM) ||
		       gice_stream_sync(s, 0),
	       "the 1st allreduce after the call");
	fprintf(stderr, "rank %d of %d: the 1st allreduce after the call completed\n", rank, size);
	gice_coll_allreduce(s, gice_team_world(), a_off, a_off, 16, GICE_INT32, GICE_RED_SUM);
	gice_stream_sync(s, 0);
	return 3; /* not killed */
}

START_TEST(kill_self_at_a_collective_at_run_time)
{
	int st[1];

	run_job(1, 1, self_rank, "tcp", NULL, st, NULL);
	ck_assert_int_eq(st[0], 128 + SIGKILL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fault_coll");
	TCase *tc;

	tc = tcase_create("kill");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, kill_at_a_collective_step);
	suite_add_tcase(s, tc);
	tc = tcase_create("hang");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, hang_at_a_collective_step);
	suite_add_tcase(s, tc);
	tc = tcase_create("self");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, kill_self_at_a_collective_at_run_time);
	suite_add_tcase(s, tc);
	tc = tcase_create("corrupt");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, corrupt_the_chunk_of_a_collective_step);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
