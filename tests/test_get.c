/* Description: gets take the paths puts take. Below the rendezvous size (GICE_CT_RNDV_BYTES)
 * the target cuts a get's data into GET_RESP packets; from it the target only validates the key
 * and range (GET_RNDV, answered GET_GO) and the requester copies the bytes from its NVLink plane
 * mapping of the target or reads them with the provider's fi_read. Cases: 1 MiB gets through the
 * plane, through fi_read (GICE_PLANE=net) and as packets (GICE_CT_RNDV_BYTES=0) are bit-exact;
 * a bad key and an out-of-range offset fail with the exact status on the completion counter,
 * write nothing, and the log names key, offset and length; the size is exact (a byte below it:
 * packets, counted in rx_bytes; at it: rndv_ops), and GICE_CT_RNDV_BYTES=auto switches puts
 * and gets at the size measured for the provider, op and path, and for CTs that spin (two devices
 * of this process) or sleep at once (GICE_DEVICES_PER_RANK=16: more devices than CPUs); more
 * rendezvous gets at once than the fabric has read slots all land; and between two processes
 * over the provider and over the plane. Runs once per provider in GICE_TEST_PROVIDERS (default
 * "shm,tcp"); a provider libfabric does not have here is skipped, and one without remote reads
 * (raw udp) skips the cases of rendezvous over it (exit 77 when no case ran).
 * The measurement of gets against puts is `gice-bench get` (docs/gice-bench.md). */
#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/gice.h"
#include "emu/ct_engine/ct_internal.h" /* ct_rndv_auto: the sizes GICE_CT_RNDV_BYTES=auto picks */
#include "tests/test_job.h"
#include "tests/test_util.h"

#define NDEV 2
#define KIB 1024u
#define MIB (1024u * 1024u)
#define BUF_BYTES (16u * MIB) /* per device: [0, 8M) data others read, [8M, 16M) destinations */
#define DST (8u * MIB)

static gice_device_t *dev[NDEV];
static uint8_t *buf[NDEV];
static uint64_t key[NDEV];
static gice_conn_t conn[NDEV][NDEV]; /* conn[i][j]: from i to j */

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static void setup(void)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		gice_device_attr_t a = {.n_sms = 2, .n_cts = 2, .hbm_bytes = 64u * MIB};
		void *p;
		ck_assert_int_eq(gice_device_open(&a, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_mem_alloc(dev[i], BUF_BYTES, &p), GICE_OK);
		buf[i] = p;
		memset(buf[i], 0, BUF_BYTES);
		ck_assert_int_eq(gice_mem_register(dev[i], buf[i], BUF_BYTES, &key[i]), GICE_OK);
	}
	for (int i = 0; i < NDEV; i++)
		for (int j = 0; j < NDEV; j++)
			ck_assert_int_eq(gice_conn_open(dev[i], gice_device_id(dev[j]), NULL, &conn[i][j]), GICE_OK);
}

static void teardown(void)
{
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_mem_deregister(dev[i], key[i]), GICE_OK);
		ck_assert_int_eq(gice_mem_free(dev[i], buf[i]), GICE_OK);
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	}
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	unsetenv("GICE_PLANE");
	unsetenv("GICE_CT_RNDV_BYTES");
	unsetenv("GICE_TIMEOUT_MS");
	unsetenv("GICE_DEVICES_PER_RANK");
}

/* The fixtures: which path a get of a size takes. GICE_CT_RNDV_BYTES=auto unless said. */
static void setup_plane(void) { setup(); }
static void setup_net(void)
{
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_TIMEOUT_MS", "10000", 1);
	setup();
}
/* 16 devices on this machine (the most GICE_DEVICES_PER_RANK says): with fewer CPUs than that,
 * CTs sleep at once when idle (asleep_spins: whether they still spin here) */
#define ASLEEP_DEVICES 16
#define STR_(x) #x
#define STR(x) STR_(x)
static int asleep_spins(void)
{
	cpu_set_t set;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	return CPU_COUNT(&set) >= ASLEEP_DEVICES;
}
static void setup_plane_asleep(void)
{
	setenv("GICE_DEVICES_PER_RANK", STR(ASLEEP_DEVICES), 1);
	setup();
}
static void setup_net_asleep(void)
{
	setenv("GICE_DEVICES_PER_RANK", STR(ASLEEP_DEVICES), 1);
	setup_net();
}
static void setup_packets(void)
{
	setenv("GICE_CT_RNDV_BYTES", "0", 1);
	setup();
}
static void setup_plane_16k(void)
{
	setenv("GICE_CT_RNDV_BYTES", "16k", 1);
	setup();
}
static void setup_net_16k(void)
{
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_CT_RNDV_BYTES", "16k", 1);
	setup();
}

static gice_counter_t ctr(int d)
{
	gice_counter_t c;
	ck_assert_int_eq(gice_counter_alloc(dev[d], &c), GICE_OK);
	return c;
}

static gice_stats_t stats(int d)
{
	gice_stats_t s;
	ck_assert_int_eq(gice_device_stats(dev[d], &s), GICE_OK);
	return s;
}

/* Device 0 gets n bytes at roff of device 1 (key k) into DST + loff of its own memory; the
 * completion counter's status. */
static int get(size_t n, uint64_t k, uint64_t roff, uint64_t loff)
{
	gice_completion_t c = ctr(0);
	gice_op_t op = {.type = GICE_OP_GET, .conn = conn[0][1], .local = buf[0] + DST + loff, .bytes = n, .rkey = k,
			.roff = roff, .signal = GICE_NO_COUNTER, .completion = c};
	gice_counter_state_t st;

	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	int rc = gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, test_scaled(20000), NULL);
	ck_assert_int_eq(gice_counter_get(dev[0], c, &st), GICE_OK);
	ck_assert_int_eq(rc, st.status); /* the waiter saw what the counter records */
	ck_assert_uint_eq(st.value + st.fail, 1);
	ck_assert_int_eq(gice_counter_free(dev[0], c), GICE_OK);
	return st.status;
}

/* ---------------------------------------------------------------- bit-exact */

/* A 1 MiB get arrives bit-exact; by rendezvous when rndv (its data in no packet), else as
 * packets (all of it counted in the requester's rx_bytes). */
static void get_1mib(int rndv)
{
	const size_t n = MIB;
	gice_stats_t before = stats(0), after;

	fill(buf[1] + 4096 + 8, n, 7);
	memset(buf[0] + DST, 0x5a, n + 64);
	ck_assert_int_eq(get(n, key[1], 4096 + 8, 0), GICE_OK);
	ck_assert_int_eq(memcmp(buf[0] + DST, buf[1] + 4096 + 8, n), 0);
	for (size_t i = n; i < n + 64; i++) /* and not a byte past the destination */
		ck_assert_uint_eq(buf[0][DST + i], 0x5a);
	after = stats(0);
	ck_assert_uint_eq(after.ops_done - before.ops_done, 1);
	ck_assert_uint_eq(after.rndv_ops - before.rndv_ops, rndv ? 1 : 0);
	if (rndv)
		ck_assert_uint_lt(after.rx_bytes - before.rx_bytes, n);
	else
		ck_assert_uint_ge(after.rx_bytes - before.rx_bytes, n);
}

START_TEST(get_of_1mib_by_rendezvous_is_bit_exact)
{
	get_1mib(1);
}
END_TEST

/* Over the provider the target's CT 0 polls while the requester reads its memory (its provider
 * may need that progress), and stops at the requester's GET_DONE: after the gets this process
 * is idle again, not spinning a core until GICE_TIMEOUT_MS (10 s here) has passed. */
START_TEST(the_target_stops_polling_once_the_reads_have_ended)
{
	struct timespec a, b;

	for (int i = 0; i < 4; i++)
		get_1mib(1);
	usleep(50000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	usleep(300000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	ck_assert_msg(ms < 100, "the process took %.1f ms of CPU in 300 ms after its gets: a CT still polls", ms);
}
END_TEST

START_TEST(get_of_1mib_as_packets_is_bit_exact)
{
	get_1mib(0);
}
END_TEST

/* ---------------------------------------------------------------- errors */

static int bad_rc[2];

/* a get with a wrong key, then one whose range ends one byte past the registration */
static void bad_gets(void)
{
	bad_rc[0] = get(MIB, key[1] ^ 0x10, 4096, 0);
	bad_rc[1] = get(MIB, key[1], BUF_BYTES - MIB + 1, 0);
}

START_TEST(get_with_bad_key_or_range_fails_with_exact_status_and_names_the_values)
{
	char log[16384], want[256];
	gice_stats_t before = stats(0), after;

	memset(buf[0] + DST, 0x5a, MIB);
	test_logged(bad_gets, log, sizeof(log));
	ck_assert_int_eq(bad_rc[0], GICE_ERR_BAD_KEY);
	ck_assert_int_eq(bad_rc[1], GICE_ERR_OUT_OF_BOUNDS);
	for (size_t i = 0; i < MIB; i++)
		ck_assert_uint_eq(buf[0][DST + i], 0x5a);
	after = stats(0);
	ck_assert_uint_eq(after.ops_failed - before.ops_failed, 2);
	/* the target logged each refusal with the values it refused */
	snprintf(want, sizeof(want), "key 0x%llx offset 4096 length %u: GICE_ERR_BAD_KEY",
		 (unsigned long long)(key[1] ^ 0x10), MIB);
	ck_assert_msg(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
	snprintf(want, sizeof(want), "key 0x%llx offset %u length %u: GICE_ERR_OUT_OF_BOUNDS",
		 (unsigned long long)key[1], BUF_BYTES - MIB + 1, MIB);
	ck_assert_msg(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
	/* and a good get right after still lands */
	fill(buf[1] + BUF_BYTES - MIB, MIB, 3);
	ck_assert_int_eq(get(MIB, key[1], BUF_BYTES - MIB, 0), GICE_OK);
	ck_assert_int_eq(memcmp(buf[0] + DST, buf[1] + BUF_BYTES - MIB, MIB), 0);
}
END_TEST

/* ---------------------------------------------------------------- threshold */

START_TEST(get_below_the_threshold_is_cut_into_packets_and_at_it_is_not)
{
	const size_t t = 16 * KIB; /* the fixture's GICE_CT_RNDV_BYTES */
	gice_stats_t s0 = stats(0), s1, s2;

	fill(buf[1], t, 11);
	ck_assert_int_eq(get(t - 1, key[1], 0, 0), GICE_OK);
	ck_assert_int_eq(memcmp(buf[0] + DST, buf[1], t - 1), 0);
	s1 = stats(0);
	ck_assert_uint_eq(s1.rndv_ops, s0.rndv_ops);
	ck_assert_uint_ge(s1.rx_bytes - s0.rx_bytes, t - 1); /* the data came in GET_RESP packets */
	ck_assert_int_eq(get(t, key[1], 0, t), GICE_OK);
	ck_assert_int_eq(memcmp(buf[0] + DST + t, buf[1], t), 0);
	s2 = stats(0);
	ck_assert_uint_eq(s2.rndv_ops, s1.rndv_ops + 1);
	ck_assert_uint_lt(s2.rx_bytes - s1.rx_bytes, t);
}
END_TEST

/* Device 0 puts n bytes from its memory to offset 0 of device 1; the completion's status. */
static int put(size_t n)
{
	gice_completion_t c = ctr(0);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = n, .rkey = key[1],
			.roff = DST, .signal = GICE_NO_COUNTER, .completion = c};

	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	int rc = gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, test_scaled(20000), NULL);
	ck_assert_int_eq(gice_counter_free(dev[0], c), GICE_OK);
	return rc;
}

/* GICE_CT_RNDV_BYTES=auto: puts and gets switch to rendezvous exactly at the size measured for
 * this provider, op, path (the fixture's GICE_PLANE) and whether the CTs spin (the fixtures': two
 * devices of one process spin, with the devices said to be more than the CPUs they sleep). */
static void auto_sizes(int plane, int spins)
{
	const char *prov = gice_device_provider(dev[0]);

	for (int is_get = 0; is_get < 2; is_get++) {
		uint64_t from = ct_rndv_auto(prov, is_get, plane, spins);
		ck_assert_uint_gt(from, 1);
		ck_assert_uint_le(from, 4 * MIB);
		fill(buf[is_get ? 1 : 0], from, 13);
		for (uint64_t n = from - 1; n <= from; n++) {
			gice_stats_t before = stats(0), after;
			ck_assert_int_eq(is_get ? get(n, key[1], 0, 0) : put(n), GICE_OK);
			ck_assert_int_eq(is_get ? memcmp(buf[0] + DST, buf[1], n) : memcmp(buf[1] + DST, buf[0], n), 0);
			after = stats(0);
			ck_assert_msg(after.rndv_ops - before.rndv_ops == (n == from),
				      "%s of %llu bytes over %s (%s): rndv_ops +%llu, the size for auto is %llu",
				      is_get ? "get" : "put", (unsigned long long)n, prov, plane ? "plane" : "net",
				      (unsigned long long)(after.rndv_ops - before.rndv_ops), (unsigned long long)from);
		}
	}
}

START_TEST(auto_size_on_the_plane_is_the_one_measured_for_the_provider_and_op)
{
	auto_sizes(1, 1);
}
END_TEST

START_TEST(auto_size_over_the_provider_is_the_one_measured_for_it_and_the_op)
{
	auto_sizes(0, 1);
}
END_TEST

START_TEST(auto_size_on_the_plane_with_sleeping_cts_is_the_one_measured_so)
{
	auto_sizes(1, asleep_spins());
}
END_TEST

START_TEST(auto_size_over_the_provider_with_sleeping_cts_is_the_one_measured_so)
{
	auto_sizes(0, asleep_spins());
}
END_TEST

/* More rendezvous gets in flight than the fabric has read slots (64): the rest wait their turn. */
#define MANY 300
START_TEST(more_rendezvous_gets_than_read_slots_all_land)
{
	const size_t n = 16 * KIB;
	gice_completion_t c = ctr(0);
	gice_stats_t before = stats(0), after;

	fill(buf[1], MANY * n, 5);
	memset(buf[0] + DST, 0, MANY * n);
	for (int i = 0; i < MANY; i++) {
		/* from the far end backwards: every get's bytes differ */
		gice_op_t op = {.type = GICE_OP_GET, .conn = conn[0][1], .local = buf[0] + DST + (size_t)i * n,
				.bytes = n, .rkey = key[1], .roff = (uint64_t)(MANY - 1 - i) * n,
				.signal = GICE_NO_COUNTER, .completion = c};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, MANY, test_scaled(30000), NULL), GICE_OK);
	for (int i = 0; i < MANY; i++)
		ck_assert_msg(!memcmp(buf[0] + DST + (size_t)i * n, buf[1] + (size_t)(MANY - 1 - i) * n, n),
			      "get %d differs", i);
	after = stats(0);
	ck_assert_uint_eq(after.rndv_ops - before.rndv_ops, MANY);
	ck_assert_uint_eq(after.ops_failed, before.ops_failed);
}
END_TEST

/* ---------------------------------------------------------------- two processes */

struct xpub {
	uint64_t key;
};

/* Rank 0 gets 1 MiB from rank 1 (bit-exact), then with a bad key (exact status); rank 1 only
 * serves. Each rank fills [0, 4M) with its pattern. */
static int xproc_rank(int rank, int size)
{
	gice_device_t *d;
	void *p;
	uint8_t *b;
	struct xpub me, all[2];
	gice_counter_t c;
	gice_counter_state_t st;
	gice_stats_t s0, s1;

	FAILIF(gice_init(), "gice_init");
	FAILIF(gice_device_open(NULL, &d), "device open");
	FAILIF(gice_mem_alloc(d, 8 * MIB, &p), "alloc");
	b = p;
	fill(b, 4 * MIB, 100 + (uint32_t)rank);
	memset(b + 4 * MIB, 0x5a, 4 * MIB);
	FAILIF(gice_mem_register(d, b, 8 * MIB, &me.key), "register");
	FAILIF(gice_counter_alloc(d, &c), "counter");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 0) {
		gice_conn_t to1;
		uint8_t *want = malloc(4 * MIB);
		FAILIF(!want, "malloc");
		fill(want, 4 * MIB, 101);
		FAILIF(gice_conn_open(d, gice_device_id_of(1, 0), NULL, &to1), "conn");
		/* the path the case is about: rank 1's memory mapped here (plane) or not (net) */
		const char *plane = getenv("GICE_PLANE");
		FAILIF(!gice_peer_ptr(d, gice_device_id_of(1, 0), 0, 8) != !strcmp(plane ? plane : "auto", "net"),
		       "GICE_PLANE=%s but rank 1 is %son this rank's NVLink plane", plane ? plane : "auto",
		       gice_peer_ptr(d, gice_device_id_of(1, 0), 0, 8) ? "" : "not ");
		gice_device_stats(d, &s0);
		gice_op_t g = {.type = GICE_OP_GET, .conn = to1, .local = b + 4 * MIB, .bytes = MIB, .rkey = all[1].key,
			       .roff = 12345, .signal = GICE_NO_COUNTER, .completion = c};
		FAILIF(gice_post(d, &g), "post");
		FAILIF(gice_counter_wait(d, c, GICE_CMP_GE, 1, test_scaled(20000), NULL), "get completion");
		FAILIF(memcmp(b + 4 * MIB, want + 12345, MIB), "1 MiB get differs");
		gice_device_stats(d, &s1);
		FAILIF(s1.rndv_ops != s0.rndv_ops + 1, "the get did not go by rendezvous");
		gice_counter_reset(d, c);
		memset(b + 4 * MIB, 0x5a, MIB);
		g.rkey ^= 1;
		FAILIF(gice_post(d, &g), "post");
		FAILIF(gice_counter_wait(d, c, GICE_CMP_GE, 1, test_scaled(20000), NULL) != GICE_ERR_BAD_KEY,
		       "bad key: not GICE_ERR_BAD_KEY");
		FAILIF(gice_counter_get(d, c, &st) || st.status != GICE_ERR_BAD_KEY || st.fail != 1, "counter state");
		for (size_t i = 0; i < MIB; i++)
			FAILIF(b[4 * MIB + i] != 0x5a, "bad-key get wrote byte %zu", i);
		free(want);
	}
	FAILIF(gice_barrier(), "barrier"); /* rank 1 serves until rank 0 is done */
	FAILIF(gice_device_close(d), "close");
	FAILIF(gice_finalize(), "finalize");
	return 0;
}

static const char *provider; /* of this run of the suite */

static void xproc(const char *plane)
{
	char env_plane[32];
	const char *env[] = {env_plane, NULL};
	int st[2];

	snprintf(env_plane, sizeof(env_plane), "GICE_PLANE=%s", plane);
	run_job(2, 2, xproc_rank, provider, env, st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
}

START_TEST(get_between_processes_over_the_provider)
{
	xproc("net");
}
END_TEST

START_TEST(get_between_processes_on_the_plane)
{
	xproc("auto");
}
END_TEST

/* ---------------------------------------------------------------- the suite */

static int ncases;
#define ADD(tc, t)                        \
	do {                              \
		tcase_add_test((tc), t); \
		ncases++;                 \
	} while (0)

static TCase *tcase(Suite *s, const char *name, void (*fixture)(void))
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, fixture, teardown);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return tc;
}

/* The suite (its cases counted in ncases); reads 0 (a provider without remote reads, such as raw
 * udp) leaves out the cases of rendezvous over the provider. */
static Suite *suite(int reads)
{
	Suite *s = suite_create("get");
	TCase *tc;

	ncases = 0;
	tc = tcase(s, "plane", setup_plane); /* same process: the NVLink plane, sizes auto */
	ADD(tc, get_of_1mib_by_rendezvous_is_bit_exact);
	ADD(tc, get_with_bad_key_or_range_fails_with_exact_status_and_names_the_values);
	ADD(tc, auto_size_on_the_plane_is_the_one_measured_for_the_provider_and_op);
	if (reads) {
		tc = tcase(s, "net", setup_net); /* every byte through the provider: fi_read */
		ADD(tc, get_of_1mib_by_rendezvous_is_bit_exact);
		ADD(tc, get_with_bad_key_or_range_fails_with_exact_status_and_names_the_values);
		ADD(tc, auto_size_over_the_provider_is_the_one_measured_for_it_and_the_op);
		ADD(tc, the_target_stops_polling_once_the_reads_have_ended);
	}
	tc = tcase(s, "plane_asleep", setup_plane_asleep);
	ADD(tc, auto_size_on_the_plane_with_sleeping_cts_is_the_one_measured_so);
	if (reads) {
		tc = tcase(s, "net_asleep", setup_net_asleep);
		ADD(tc, auto_size_over_the_provider_with_sleeping_cts_is_the_one_measured_so);
	}
	tc = tcase(s, "packets", setup_packets); /* GICE_CT_RNDV_BYTES=0: never rendezvous */
	ADD(tc, get_of_1mib_as_packets_is_bit_exact);
	ADD(tc, get_with_bad_key_or_range_fails_with_exact_status_and_names_the_values);
	tc = tcase(s, "plane_16k", setup_plane_16k);
	ADD(tc, get_below_the_threshold_is_cut_into_packets_and_at_it_is_not);
	ADD(tc, more_rendezvous_gets_than_read_slots_all_land);
	if (reads) {
		tc = tcase(s, "net_16k", setup_net_16k);
		ADD(tc, get_below_the_threshold_is_cut_into_packets_and_at_it_is_not);
		ADD(tc, more_rendezvous_gets_than_read_slots_all_land);
	}
	tc = tcase_create("processes"); /* ranks fork their own devices: no fixture */
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	if (reads)
		ADD(tc, get_between_processes_over_the_provider);
	ADD(tc, get_between_processes_on_the_plane);
	return s;
}

int main(void)
{
	const char *list = getenv("GICE_TEST_PROVIDERS");
	char provs[256];
	int failed = 0, ran = 0, all;

	setvbuf(stdout, NULL, _IOLBF, 0);
	srunner_free(srunner_create(suite(1))); /* counts ncases */
	all = ncases;
	snprintf(provs, sizeof(provs), "%s", list && *list ? list : "shm,tcp");
	for (char *save, *p = strtok_r(provs, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		gice_device_t *probe;
		setenv("GICE_FI_PROVIDER", p, 1);
		gice_init();
		int rc = gice_device_open(NULL, &probe);
		if (rc == GICE_ERR_NOT_FOUND) {
			test_skip_cases(all, "provider %s: fi_getinfo finds no such provider here", p);
			gice_finalize();
			continue;
		}
		if (rc) { /* here but not working: a failure, not a skip */
			printf("provider %s: gice_device_open failed: %s\n", p, gice_status_name(rc));
			gice_finalize();
			failed++;
			continue;
		}
		gice_device_close(probe);
		gice_finalize();
		/* does it offer remote reads? (the device does not say) */
		fab_attr_t fa = {.provider = p, .max_packet = 4096};
		fab_ep_t *ep;
		int reads = 0;
		if (fab_open(&fa, &ep) == GICE_OK) {
			reads = ep->rma;
			fab_close(ep);
		}
		printf("provider %s\n", p);
		provider = p;
		SRunner *sr = srunner_create(suite(reads));
		if (ncases < all)
			test_skip_cases(all - ncases, "provider %s offers no remote reads: no rendezvous over it", p);
		srunner_run_all(sr, CK_NORMAL);
		failed += srunner_ntests_failed(sr);
		ran += srunner_ntests_run(sr);
		srunner_free(sr);
	}
	return test_exit_counts(failed, ran);
}
