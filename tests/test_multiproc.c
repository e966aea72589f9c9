/* Description: ranks in separate processes on one host, joined through the bootstrap: put
 * (packets and rendezvous) with a strong signal, get and contended atomics between processes
 * over shm and tcp; 4 ranks all-to-all; a rank that never starts makes rank 0's gice_init fail
 * within GICE_BOOTSTRAP_TIMEOUT_MS with a message naming it. Each rank is a forked child with
 * its own GICE_RANK; the test process only starts and reaps them. */
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"

#define MIB (1024u * 1024u)

static uint8_t pat(int rank, size_t i) { return (uint8_t)(i * 7 + (size_t)rank * 13 + 1); }

struct shared { /* what each rank publishes */
	uint64_t key;
	uint32_t sig;
	uint32_t pad;
};

/* Every rank: a 4 MiB registered buffer [0,2M) its own data, [2M,4M) landing zone for the left
 * neighbour's put. Ring: put 300 KiB (rendezvous) + put 1000 B (packets) with a strong signal to
 * the right; check what came from the left; get 100 KiB from the right; 500 fetch-adds on rank
 * 0's counter word; barrier; rank 0 checks the sum. */
static int ring_rank(int rank, int size)
{
	gice_device_t *d;
	uint8_t *buf;
	void *p;
	struct shared me, all[16];
	gice_counter_t c;
	int right = (rank + 1) % size, left = (rank + size - 1) % size;

	FAILIF(gice_init(), "gice_init");
	FAILIF(gice_rank() != (uint32_t)rank || gice_world_size() != (uint32_t)size, "rank/size");
	FAILIF(gice_device_open(NULL, &d), "device open");
	FAILIF(gice_device_id(d) != gice_device_id_of((uint32_t)rank, 0), "device id %u", gice_device_id(d));
	FAILIF(gice_mem_alloc(d, 4 * MIB, &p), "alloc");
	buf = p;
	for (size_t i = 0; i < 2 * MIB; i++)
		buf[i] = pat(rank, i);
	memset(buf + 2 * MIB, 0, 2 * MIB);
	FAILIF(gice_mem_register(d, buf, 4 * MIB, &me.key), "register");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &c), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");

	gice_conn_t to_right;
	FAILIF(gice_conn_open(d, gice_device_id_of((uint32_t)right, 0), NULL, &to_right), "conn");
	gice_op_t big = {.type = GICE_OP_PUT, .conn = to_right, .local = buf, .bytes = 300 * 1024,
			 .rkey = all[right].key, .roff = 2 * MIB, .signal = GICE_NO_COUNTER, .completion = c};
	gice_op_t small = {.type = GICE_OP_PUT, .conn = to_right, .local = buf + 300 * 1024, .bytes = 1000,
			   .rkey = all[right].key, .roff = 2 * MIB + 300 * 1024, .value = 1, .signal = all[right].sig,
			   .signal_flags = GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, .completion = c};
	FAILIF(gice_post(d, &big) || gice_post(d, &small), "post");
	FAILIF(gice_counter_wait(d, me.sig, GICE_CMP_GE, 1, 20000, NULL), "signal from rank %d", left);
	for (size_t i = 0; i < 300 * 1024 + 1000; i++)
		FAILIF(buf[2 * MIB + i] != pat(left, i), "byte %zu from rank %d", i, left);
	FAILIF(gice_counter_wait(d, c, GICE_CMP_GE, 2, 20000, NULL), "put completions");

	gice_counter_reset(d, c);
	gice_op_t get = {.type = GICE_OP_GET, .conn = to_right, .local = buf + 3 * MIB, .bytes = 100 * 1024,
			 .rkey = all[right].key, .roff = 5000, .signal = GICE_NO_COUNTER, .completion = c};
	FAILIF(gice_post(d, &get), "get");
	FAILIF(gice_counter_wait(d, c, GICE_CMP_GE, 1, 20000, NULL), "get completion");
	for (size_t i = 0; i < 100 * 1024; i++)
		FAILIF(buf[3 * MIB + i] != pat(right, 5000 + i), "get byte %zu from rank %d", i, right);

	gice_conn_t to0;
	FAILIF(gice_conn_open(d, gice_device_id_of(0, 0), NULL, &to0), "conn to 0");
	FAILIF(gice_barrier(), "barrier"); /* everyone has checked its data: rank 0's word may change */
	gice_counter_reset(d, c);
	gice_op_t add = {.type = GICE_OP_ATOMIC_ADD, .conn = to0, .rkey = all[0].key, .roff = 2 * MIB - 64,
			 .value = 1, .signal = GICE_NO_COUNTER, .completion = c};
	if (rank == 0)
		memset(buf + 2 * MIB - 64, 0, 8);
	FAILIF(gice_barrier(), "barrier");
	for (int i = 0; i < 500; i++)
		FAILIF(gice_post(d, &add), "atomic");
	FAILIF(gice_counter_wait(d, c, GICE_CMP_GE, 500, 20000, NULL), "atomic completions");
	FAILIF(gice_barrier(), "barrier");
	if (rank == 0) {
		/* an atomic load: the word is written by the CT's atomics; what orders those before
		 * this read (the responses, the barrier) passes through other processes, which TSan
		 * cannot see */
		uint64_t sum = __atomic_load_n((uint64_t *)(void *)(buf + 2 * MIB - 64), __ATOMIC_ACQUIRE);
		FAILIF(sum != 500u * (uint64_t)size, "atomic sum %llu, expected %u", (unsigned long long)sum, 500 * size);
	}
	FAILIF(gice_barrier(), "final barrier");
	FAILIF(gice_mem_deregister(d, me.key) || gice_mem_free(d, buf) || gice_device_close(d), "teardown");
	gice_finalize();
	return 0;
}

static void check_job(int size, const char *provider)
{
	int st[16];

	run_job(size, size, ring_rank, provider, NULL, st, NULL);
	for (int r = 0; r < size; r++)
		ck_assert_msg(st[r] == 0, "rank %d of %d on %s exited %d (its stderr says why)", r, size, provider, st[r]);
}

START_TEST(two_processes_put_get_atomics_signals_over_shm)
{
	check_job(2, "shm");
}
END_TEST

START_TEST(two_processes_put_get_atomics_signals_over_tcp)
{
	check_job(2, "tcp");
}
END_TEST

START_TEST(four_processes_ring_over_tcp)
{
	check_job(4, "tcp");
}
END_TEST

START_TEST(two_processes_over_the_network_plane_only)
{
	int st[16];

	run_job(2, 2, ring_rank, "shm", (const char *[]){"GICE_PLANE=net", NULL}, st, NULL);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d", r, st[r]);
}
END_TEST

/* NVLink plane across processes: rank 0 stores into rank 1's memory through gice_peer_ptr,
 * then adds to rank 1's signal counter in rank 1's trigger memory; under GICE_PLANE=net there
 * is neither. */
static int peer_ptr_rank(int rank, int size)
{
	gice_device_t *d;
	void *p;
	struct shared me, all[2];
	uint64_t off[2], mine;
	int net = getenv("GICE_PLANE") && !strcmp(getenv("GICE_PLANE"), "net");

	FAILIF(size != 2, "size");
	FAILIF(gice_init() || gice_device_open(NULL, &d), "init/open");
	FAILIF(gice_mem_alloc(d, MIB, &p), "alloc");
	memset(p, 0, MIB);
	FAILIF(gice_mem_register(d, p, MIB, &me.key) || gice_counter_alloc(d, &me.sig), "register");
	FAILIF(gice_mem_offset(d, p, &mine), "offset");
	FAILIF(gice_allgather(&me, sizeof(me), all) || gice_allgather(&mine, sizeof(mine), off), "allgather");
	uint8_t *peer = gice_peer_ptr(d, gice_device_id_of((uint32_t)(1 - rank), 0), off[1 - rank], MIB);
	if (net) {
		gice_kctx_t k = {.dev = d};
		FAILIF(peer != NULL, "a peer pointer under GICE_PLANE=net");
		FAILIF(gice_peer_trigger_add(&k, gice_device_id_of((uint32_t)(1 - rank), 0), all[1 - rank].sig, 1) !=
			       GICE_ERR_UNSUPPORTED,
		       "a peer trigger under GICE_PLANE=net");
	} else if (rank == 0) {
		FAILIF(!peer, "no peer pointer to rank 1");
		for (size_t i = 0; i < MIB; i++)
			peer[i] = (uint8_t)(i * 3 + 1);
		/* stores first, then the peer's trigger memory directly (release order on x86 and
		 * through the counter's seq_cst update) */
		gice_kctx_t k = {.dev = d};
		FAILIF(gice_peer_trigger_add(&k, gice_device_id_of(1, 0), all[1].sig, 1), "peer trigger");
	} else {
		FAILIF(gice_counter_wait(d, me.sig, GICE_CMP_GE, 1, 20000, NULL), "signal");
		for (size_t i = 0; i < MIB; i++)
			FAILIF(((uint8_t *)p)[i] != (uint8_t)(i * 3 + 1), "byte %zu stored by rank 0", i);
	}
	FAILIF(gice_barrier(), "barrier");
	FAILIF(gice_device_close(d), "close");
	gice_finalize();
	return 0;
}

START_TEST(peer_pointers_between_processes_on_one_host)
{
	int st[16];

	run_job(2, 2, peer_ptr_rank, NULL, NULL, st, NULL);
	ck_assert_msg(st[0] == 0 && st[1] == 0, "ranks exited %d, %d", st[0], st[1]);
	run_job(2, 2, peer_ptr_rank, NULL, (const char *[]){"GICE_PLANE=net", NULL}, st, NULL);
	ck_assert_msg(st[0] == 0 && st[1] == 0, "GICE_PLANE=net: ranks exited %d, %d", st[0], st[1]);
}
END_TEST

START_TEST(four_processes_ring_over_shm_with_packets_only)
{
	int st[16];

	run_job(4, 4, ring_rank, "shm", (const char *[]){"GICE_CT_RNDV_BYTES=0", NULL}, st, NULL);
	for (int r = 0; r < 4; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d", r, st[r]);
}
END_TEST

static int init_only_rank(int rank, int size)
{
	(void)size;
	int rc = gice_init();
	if (rank == 0)
		return rc == GICE_ERR_TIMED_OUT ? 0 : 10 + (rc < 0 ? -rc : rc);
	return rc ? 0 : 20; /* the others fail too once rank 0 gives up */
}

START_TEST(a_rank_that_never_starts_fails_the_others_naming_it)
{
	char log[] = "/tmp/gice-boot-XXXXXX";
	int fd = mkstemp(log), st[16];
	struct timespec t0, t1;

	ck_assert_int_ge(fd, 0);
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_job(3, 2, init_only_rank, NULL, (const char *[]){"GICE_BOOTSTRAP_TIMEOUT_MS=1000", NULL}, st, log); /* rank 2 never starts */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, (long)test_scaled(10));
	char text[2048];
	job_log_take(log, text, sizeof(text));
	ck_assert_msg(strstr(text, "rank(s) 2 of 3 never arrived"), "rank 0 said: %s", text);
}
END_TEST

/* `test_multiproc idle-rank` is one rank of a job that test_netns.sh runs across network
 * namespaces (no trigger memory mapped between them, so no doorbell rings across): rank 0 puts
 * to rank 1 five times, each after 300 ms of idleness, with host calls only (no kernel polls
 * the link). Rank 1's CT 0 sleeps then; the script sets GICE_CT_POLL_US to 10 s. Its other
 * wake-ups (the watchdog's pass every 100 ms) would make the median put take ~100 ms; woken by
 * the packet itself (the fabric's wait fd) it takes well under a millisecond: the median must
 * be below 30 ms. Exit 0 when it is and every put landed. */
static int idle_rank(void)
{
	gice_device_t *d;
	gice_counter_t done;
	struct shared me, all[2];
	gice_conn_t c;
	uint8_t *buf;
	void *p;
	int rc = 1;

	if (gice_init() || gice_world_size() != 2 || gice_device_open(NULL, &d))
		return 2;
	if (gice_mem_alloc(d, 4096, &p) || gice_mem_register(d, p, 4096, &me.key) || gice_counter_alloc(d, &me.sig) ||
	    gice_counter_alloc(d, &done) || gice_allgather(&me, sizeof(me), all) ||
	    gice_conn_open(d, gice_device_id_of(1 - gice_rank(), 0), NULL, &c))
		return 3;
	buf = p;
	if (gice_rank() == 0) {
		double us[5];
		for (int i = 0; i < 5; i++) {
			usleep(300000);
			buf[i] = (uint8_t)(i + 1);
			gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = buf + i, .bytes = 1, .rkey = all[1].key,
					.roff = (uint64_t)i, .value = 1, .signal = all[1].sig,
					.signal_flags = GICE_SIGNAL_ADD, .completion = done};
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			if (gice_post(d, &op) || gice_counter_wait(d, done, GICE_CMP_GE, (uint64_t)i + 1, 3000, NULL)) {
				fprintf(stderr, "idle-rank: put %d after 300 ms idle did not complete within 3 s\n", i);
				goto out;
			}
			clock_gettime(CLOCK_MONOTONIC, &b);
			us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
			printf("idle-rank: put %d after 300 ms idle completed in %.0f us\n", i, us[i]);
		}
		for (int i = 1; i < 5; i++) /* insertion sort for the median */
			for (int j = i; j > 0 && us[j] < us[j - 1]; j--) {
				double t = us[j];
				us[j] = us[j - 1];
				us[j - 1] = t;
			}
		rc = us[2] < (double)test_scaled(30000) ? 0 : 6;
		if (rc)
			fprintf(stderr, "idle-rank: median put after idleness %.0f us: the idle device was not woken by "
				"the packet\n", us[2]);
	} else {
		rc = gice_counter_wait(d, me.sig, GICE_CMP_GE, 5, 20000, NULL) ? 4 : 0;
		for (int i = 0; !rc && i < 5; i++)
			rc = buf[i] == i + 1 ? 0 : 5;
	}
out:
	gice_barrier();
	gice_device_close(d);
	gice_finalize();
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "idle-rank"))
		return idle_rank();
	Suite *s = suite_create("multiproc");
	TCase *tc = tcase_create("ranks");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, two_processes_put_get_atomics_signals_over_shm);
	tcase_add_test(tc, two_processes_put_get_atomics_signals_over_tcp);
	tcase_add_test(tc, four_processes_ring_over_tcp);
	tcase_add_test(tc, four_processes_ring_over_shm_with_packets_only);
	tcase_add_test(tc, a_rank_that_never_starts_fails_the_others_naming_it);
	tcase_add_test(tc, two_processes_over_the_network_plane_only);
	tcase_add_test(tc, peer_pointers_between_processes_on_one_host);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
