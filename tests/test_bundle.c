/* Description: small packets to one peer travel bundled, back to back in one fabric message
 * (ct_link_tx.c; GICE_MTU, GICE_BUNDLE_BYTES). Two devices of one process over tcp (the network
 * plane: every byte crosses the provider); a kernel on the first issues 10 bursts of 64 puts of
 * 4 KiB to the second, each burst waited for, and every byte lands.
 * - By default (auto: 64 KiB over tcp) a fabric message carries more such packets than a 16 KiB
 *   one can hold: the sender's tx_pkts exceed 3 x its fab_sends (a 16 KiB bundle holds at most
 *   3 packets of 96 + 4096 bytes).
 * - GICE_BUNDLE_BYTES=16384 bounds them: tx_pkts is at most 3 x fab_sends, in every run.
 * - So does auto while GICE_FAULTS injects network faults (a delay of 1 us): the injector acts on
 *   fabric messages and sees the ones it saw.
 * - A value that is neither auto nor a size, or above 1 MiB, fails the device's open with
 *   GICE_ERR_CONFIG and the value in the log.
 * - A kernel's small puts to a peer whose bundle waits for its earlier packets' ACK (corked)
 *   join that bundle without a pass of the link (bundle_joins counts them); the pass that
 *   sends it takes them too. When the kernel then computes, neither waiting nor issuing, every
 *   one of a burst of 64 puts still lands while it computes (CT 0 sends the bundle), over shm
 *   and tcp; bursts until one had puts join (at most 10).
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. */
#include <check.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gice.h"
#include "emu/common/common.h" /* gice_clock_ns */
#include "tests/test_dev.h"
#include "tests/test_util.h"

#define PUT_BYTES 4096u
#define WINDOW 64u
#define BURSTS 10u
#define BUF (WINDOW * PUT_BYTES)

static gice_device_t *dev[2];
static uint8_t *buf[2];
static uint64_t key[2];
static gice_conn_t conn;  /* dev[0] -> dev[1] */
static gice_counter_t done;

static void open_pair_over(const char *provider)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 2, .hbm_bytes = 4 * BUF, .provider = provider};

	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("GICE_PLANE", "net", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < 2; i++)
		test_dev_open(&at, BUF, &dev[i], &buf[i], &key[i]);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &conn), GICE_OK);
}

static void open_pair(void) { open_pair_over("tcp"); }

static void close_pair(void)
{
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static uint8_t pattern(uint32_t burst, uint32_t j, uint32_t i) { return (uint8_t)(burst * 31u + j * 7u + i); }

static void burst_kernel(gice_kctx_t *k, void *arg)
{
	_Atomic int *rc = *(_Atomic int **)arg;

	for (uint32_t b = 0; b < BURSTS; b++) {
		for (uint32_t j = 0; j < WINDOW; j++)
			for (uint32_t i = 0; i < PUT_BYTES; i++)
				buf[0][j * PUT_BYTES + i] = pattern(b, j, i);
		for (uint32_t j = 0; j < WINDOW; j++) {
			int r = gice_put(k, conn, key[1], (uint64_t)j * PUT_BYTES, buf[0] + j * PUT_BYTES, PUT_BYTES, done);
			if (r) {
				atomic_store(rc, r);
				return;
			}
		}
		int r = gice_wait_until(k, done, GICE_CMP_GE, (uint64_t)(b + 1) * WINDOW, 0, NULL);
		if (r) {
			atomic_store(rc, r);
			return;
		}
	}
}

/* Run the bursts; every byte of the last one landed. Returns the sender's stats. */
static gice_stats_t run_bursts(void)
{
	_Atomic int rc = GICE_OK, *rcp = &rc;
	gice_stream_t *s;
	gice_stats_t st;

	ck_assert_int_eq(gice_stream_create(dev[0], &s), GICE_OK);
	ck_assert_int_eq(gice_launch(s, burst_kernel, 1, &rcp, sizeof(rcp)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(s, test_scaled(60000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&rc), GICE_OK);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[0], done), BURSTS * WINDOW);
	for (uint32_t j = 0; j < WINDOW; j++)
		for (uint32_t i = 0; i < PUT_BYTES; i++)
			if (buf[1][j * PUT_BYTES + i] != pattern(BURSTS - 1, j, i))
				ck_abort_msg("put %u: byte %u is 0x%02x, expected 0x%02x", j, i, buf[1][j * PUT_BYTES + i],
					     pattern(BURSTS - 1, j, i));
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	fprintf(stderr, "bundle: %u puts of %u B over tcp: tx_pkts %llu, fab_sends %llu (%.1f packets a message)\n",
		BURSTS * WINDOW, PUT_BYTES, (unsigned long long)st.tx_pkts, (unsigned long long)st.fab_sends,
		st.fab_sends ? (double)st.tx_pkts / (double)st.fab_sends : 0.0);
	ck_assert_uint_ge(st.tx_pkts, BURSTS * WINDOW);
	return st;
}

#define JOIN_PUTS 64u

struct join_args {
	gice_counter_t sig;  /* the receiver's: one per put that landed */
	_Atomic int landed;  /* the host saw every put land: the kernel stops computing */
	_Atomic int rc;
};

/* 64 puts of 8 B back to back, then compute: no call into gice until the host has seen them
 * all land, or 10 s (scaled) have passed. */
static void burst_then_compute(gice_kctx_t *k, void *arg)
{
	struct join_args *a = *(struct join_args **)arg;

	for (uint32_t j = 0; j < JOIN_PUTS; j++) {
		int r = gice_put_signal(k, conn, key[1], (uint64_t)j * 8, buf[0] + j * 8, 8, a->sig, 1, GICE_SIGNAL_ADD,
					done);
		if (r) {
			atomic_store(&a->rc, r);
			return;
		}
	}
	uint64_t until = gice_clock_ns() / 1000000 + test_scaled(10000);
	while (!atomic_load(&a->landed) && gice_clock_ns() / 1000000 < until)
		sched_yield();
}

/* Bursts of 64 puts then computing, until one burst had puts join a corked bundle (whether a
 * bundle is corked when the next put comes depends on when the ACKs come back): each burst lands
 * while its kernel still computes. */
static void joined_puts_land_while_the_kernel_computes(const char *provider)
{
	struct join_args a, *ap = &a;
	gice_stream_t *s;
	gice_stats_t st = {0};
	uint32_t burst;

	open_pair_over(provider);
	for (uint32_t j = 0; j < JOIN_PUTS; j++)
		memcpy(buf[0] + j * 8, &(uint64_t){0x6a6f696e00000000ull | j}, 8);
	ck_assert_int_eq(gice_counter_alloc(dev[1], &a.sig), GICE_OK);
	/* the connection is up (a first send waits for it, and the puts behind it bundle) */
	gice_op_t first = {.type = GICE_OP_PUT, .conn = conn, .local = buf[0], .bytes = 8, .rkey = key[1],
			   .signal = GICE_NO_COUNTER, .completion = done};
	ck_assert_int_eq(gice_post(dev[0], &first), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, 1, (int)test_scaled(20000), NULL), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[0], &s), GICE_OK);
	for (burst = 1; burst <= 10 && !st.bundle_joins; burst++) {
		atomic_store(&a.landed, 0);
		atomic_store(&a.rc, GICE_OK);
		uint64_t t0 = gice_clock_ns() / 1000000;
		ck_assert_int_eq(gice_launch(s, burst_then_compute, 1, &ap, sizeof(ap)), GICE_OK);
		int rc = gice_counter_wait(dev[1], a.sig, GICE_CMP_GE, burst * JOIN_PUTS, (int)test_scaled(5000), NULL);
		uint64_t took = gice_clock_ns() / 1000000 - t0;
		int computing = !atomic_load(&a.landed); /* the kernel still computes: it let the host go on */
		atomic_store(&a.landed, 1);
		ck_assert_int_eq(gice_stream_sync(s, test_scaled(30000)), GICE_OK);
		ck_assert_int_eq(atomic_load(&a.rc), GICE_OK);
		ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
		fprintf(stderr, "bundle: %s: burst %u: %u puts of 8 B landed in %llu ms while the kernel computed; "
				"bundle_joins %llu, tx_pkts %llu, fab_sends %llu\n",
			provider, burst, JOIN_PUTS, (unsigned long long)took, (unsigned long long)st.bundle_joins,
			(unsigned long long)st.tx_pkts, (unsigned long long)st.fab_sends);
		ck_assert_msg(rc == GICE_OK, "%s: burst %u: %llu of %u puts landed in %llu ms while the kernel computed (%s)",
			      provider, burst, (unsigned long long)gice_counter_read(dev[1], a.sig) - (burst - 1) * JOIN_PUTS,
			      JOIN_PUTS, (unsigned long long)took, gice_status_name(rc));
		ck_assert(computing);
		/* and complete: every ACK comes back (the kernel did not wait for them) */
		ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, 1 + burst * JOIN_PUTS, (int)test_scaled(5000), NULL),
				 GICE_OK);
		ck_assert_uint_eq(gice_counter_read(dev[0], done), 1 + burst * JOIN_PUTS);
		for (uint32_t j = 0; j < JOIN_PUTS; j++)
			ck_assert_int_eq(memcmp(buf[1] + j * 8, buf[0] + j * 8, 8), 0);
	}
	ck_assert_msg(st.bundle_joins > 0, "%s: no put joined a corked bundle in %u bursts", provider, burst - 1);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	close_pair();
}

START_TEST(joined_puts_land_over_shm) { joined_puts_land_while_the_kernel_computes("shm"); }
END_TEST

START_TEST(joined_puts_land_over_tcp) { joined_puts_land_while_the_kernel_computes("tcp"); }
END_TEST

START_TEST(tcp_bundles_hold_more_than_an_mtu)
{
	open_pair();
	gice_stats_t st = run_bursts();
	ck_assert_msg(st.tx_pkts > 3 * st.fab_sends,
		      "tx_pkts %llu, fab_sends %llu: no fabric message carried more than a 16 KiB bundle holds",
		      (unsigned long long)st.tx_pkts, (unsigned long long)st.fab_sends);
	close_pair();
}
END_TEST

/* With env set to value, the bursts leave in bundles of at most 16 KiB (3 packets). */
static void bundles_of_16_kib(const char *env, const char *value)
{
	setenv(env, value, 1);
	open_pair();
	gice_stats_t st = run_bursts();
	ck_assert_msg(st.tx_pkts <= 3 * st.fab_sends, "%s=%s: tx_pkts %llu, fab_sends %llu: a bundle held more than 16 KiB",
		      env, value, (unsigned long long)st.tx_pkts, (unsigned long long)st.fab_sends);
	close_pair();
}

START_TEST(bundle_bytes_bounds_a_bundle) { bundles_of_16_kib("GICE_BUNDLE_BYTES", "16384"); }
END_TEST

START_TEST(faults_keep_bundles_to_the_mtu) { bundles_of_16_kib("GICE_FAULTS", "delay_us=1,seed=1"); }
END_TEST

static void open_refused(const char *value, const char *logged)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 1, .provider = "tcp"};
	gice_device_t *d = NULL;
	struct test_log log;
	char text[2048];

	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("GICE_BUNDLE_BYTES", value, 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	test_log_begin(&log);
	int rc = gice_device_open(&at, &d);
	test_log_end(&log, text, sizeof(text));
	ck_assert_msg(rc == GICE_ERR_CONFIG, "GICE_BUNDLE_BYTES=%s: open returned %s", value, gice_status_name(rc));
	ck_assert_ptr_null(d);
	ck_assert_msg(strstr(text, logged), "GICE_BUNDLE_BYTES=%s logged '%s', expected '%s'", value, text, logged);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

START_TEST(a_bad_bundle_size_is_refused)
{
	open_refused("lots", "GICE_BUNDLE_BYTES=\"lots\": expected auto or a size in bytes (0: GICE_MTU)");
}
END_TEST

START_TEST(a_bundle_above_1_mib_is_refused)
{
	open_refused("2m", "GICE_BUNDLE_BYTES=2097152 is outside [0, 1048576]");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bundle");
	TCase *tc = tcase_create("bundle");
	SRunner *sr = srunner_create(s);
	int rc;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tcp_bundles_hold_more_than_an_mtu);
	tcase_add_test(tc, bundle_bytes_bounds_a_bundle);
	tcase_add_test(tc, faults_keep_bundles_to_the_mtu);
	tcase_add_test(tc, a_bad_bundle_size_is_refused);
	tcase_add_test(tc, a_bundle_above_1_mib_is_refused);
	tcase_add_test(tc, joined_puts_land_over_shm);
	tcase_add_test(tc, joined_puts_land_over_tcp);
	suite_add_tcase(s, tc);
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
