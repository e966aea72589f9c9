/* Description: how many of a device's CT threads spin when idle (ct_params.c, ct_tile.c). With
 * GICE_CT_SPIN_US unset, at most CPUs / (the job's devices on this machine) CTs of a device spin
 * at once after their last work, and none when the devices outnumber the CPUs. Two devices of one
 * process, pinned to two CPUs; the host posts 100 puts from the first to the second, one at a
 * time, each waited for: the second runs no kernel, so only its CT threads take a put in.
 * - GICE_DEVICES_PER_RANK=2 (two devices for two CPUs, one CT each may spin): the receiving CT 0
 *   is still spinning when the next put arrives, so few of the sender's kicks wake it (counted
 *   in kicks_woke). Only a put that reaches the receiver within its spin time (GICE_CT_SPIN_US,
 *   200 us) of its last work can find it spinning: a put that landed (the time stamp of the
 *   receiver's signal counter) more than 150 us (scaled for sanitizers) after the one before,
 *   which was the receiver's work before it, is not counted (a VM whose CPUs the host took
 *   away, a slow wake-up). Once 100 puts have come in time (of at most 1000), at most half of
 *   them may have woken it;
 * - GICE_DEVICES_PER_RANK=4 (more devices than CPUs: none spins): the receiving CT 0 sleeps
 *   after each put, and nearly every put's kick wakes it.
 * The host polls the completion counter (yielding) rather than sleeping on it, so that its own
 * wake-ups do not stretch the round trips.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. Skipped (exit 77) on a machine with fewer than two CPUs. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gice.h"
#include "emu/common/common.h" /* gice_clock_ns */
#include "tests/test_util.h"

#define PUTS 100u
#define MAX_PUTS 1000u
#define BUF 4096u
#define IN_TIME_NS 150000u /* under the 200 us a CT spins after its last work (scaled) */

static uint64_t kicks_woke(gice_device_t *d)
{
	gice_stats_t st;

	ck_assert_int_eq(gice_device_stats(d, &st), GICE_OK);
	return st.kicks_woke;
}

/* The sender's kicks that woke the receiver's sleeping CT 0, over PUTS host-posted puts; in_time:
 * over the first PUTS that landed within IN_TIME_NS of the put before (at most MAX_PUTS posted). */
static uint64_t kicks_woke_over_puts(const char *devices_per_rank, int in_time)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 2, .hbm_bytes = 4 * BUF};
	gice_device_t *dev[2];
	uint8_t *buf[2];
	uint64_t key, src_key;
	gice_conn_t conn;
	gice_counter_t done, sig;
	cpu_set_t all, two;
	void *p;

	/* two CPUs, whatever the machine has: the rule divides them */
	ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&two);
	for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &two);
			n++;
		}
	ck_assert_int_eq(sched_setaffinity(0, sizeof(two), &two), 0);
	unsetenv("GICE_CT_SPIN_US");
	setenv("GICE_DEVICES_PER_RANK", devices_per_rank, 1);
	setenv("GICE_PLANE", "net", 1); /* every put crosses the provider to the receiver's link */
	setenv("GICE_TIMEOUT_MS", "60000", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(gice_device_open(&at, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_mem_alloc(dev[i], BUF, &p), GICE_OK);
		buf[i] = p;
	}
	ck_assert_int_eq(gice_mem_register(dev[0], buf[0], BUF, &src_key), GICE_OK);
	ck_assert_int_eq(gice_mem_register(dev[1], buf[1], BUF, &key), GICE_OK);
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &conn), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[1], &sig), GICE_OK);
	uint64_t woke = 0, counted = 0, posted = 0, t_prev = 0, in_time_ns = test_scaled(IN_TIME_NS);
	while (counted < PUTS && posted < (in_time ? MAX_PUTS : PUTS)) {
		uint32_t i = (uint32_t)posted++;
		uint64_t k0 = kicks_woke(dev[0]), deadline = gice_clock_ns() + test_scaled(20000) * 1000000u;
		gice_counter_state_t landed;
		memset(buf[0], (int)i, 64);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = buf[0], .bytes = 64, .rkey = key,
				.roff = 64 * (i % (BUF / 64)), .value = 1, .signal = sig, .signal_flags = GICE_SIGNAL_ADD,
				.completion = done};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		while (gice_counter_read(dev[0], done) < posted) {
			ck_assert_msg(gice_clock_ns() < deadline, "put %u: no completion in 20 s", i);
			sched_yield();
		}
		ck_assert_uint_eq(buf[1][64 * (i % (BUF / 64))], (uint8_t)i);
		ck_assert_int_eq(gice_counter_get(dev[1], sig, &landed), GICE_OK);
		ck_assert_uint_eq(landed.value, posted); /* its stamp is this put's landing */
		/* the receiver's last work before this put was the put before it, or later */
		int counts = !in_time || (t_prev && landed.ts_ns - t_prev < in_time_ns);
		t_prev = landed.ts_ns;
		if (counts) {
			woke += kicks_woke(dev[0]) - k0;
			counted++;
		}
	}
	fprintf(stderr, "spin: GICE_DEVICES_PER_RANK=%s, 2 CPUs: %llu of %llu puts%s woke the receiver's CT 0 (%llu posted)\n",
		devices_per_rank, (unsigned long long)woke, (unsigned long long)counted,
		in_time ? " that landed in time" : "", (unsigned long long)posted);
	ck_assert_msg(counted == PUTS, "only %llu of %llu puts landed within %llu us of the one before: the machine is "
		      "too slow to tell whether a CT spins", (unsigned long long)counted, (unsigned long long)posted,
		      (unsigned long long)in_time_ns / 1000);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	return woke;
}

START_TEST(a_device_with_its_share_of_the_cpus_keeps_a_ct_spinning)
{
	ck_assert_uint_le(kicks_woke_over_puts("2", 1), PUTS / 2);
}
END_TEST

START_TEST(more_devices_than_cpus_spin_none)
{
	ck_assert_uint_ge(kicks_woke_over_puts("4", 0), PUTS / 2);
}
END_TEST

int main(void)
{
	cpu_set_t all;

	if (sched_getaffinity(0, sizeof(all), &all) || CPU_COUNT(&all) < 2) {
		fprintf(stderr, "test_spin: skipped: fewer than two CPUs here\n");
		return 77;
	}
	Suite *s = suite_create("spin");
	TCase *tc = tcase_create("spin");
	SRunner *sr = srunner_create(s);
	int rc;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_device_with_its_share_of_the_cpus_keeps_a_ct_spinning);
	tcase_add_test(tc, more_devices_than_cpus_spin_none);
	suite_add_tcase(s, tc);
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
