/* Description: how many of a device's CT threads spin when idle (ct_params.c, ct_tile.c). With
 * GICE_CT_SPIN_US unset, at most CPUs / (the job's devices on this machine) CTs of a device spin
 * at once after their last work, and none when the devices outnumber the CPUs. Two devices of one
 * process, pinned to two CPUs; the host posts 100 puts from the first to the second, one at a
 * time, each waited for: the second runs no kernel, so only its CT threads take a put in.
 * - GICE_DEVICES_PER_RANK=2 (two devices for two CPUs, one CT each may spin): the receiving CT 0
 *   is still spinning when the next put arrives, so few of the sender's kicks wake it (counted
 *   in kicks_woke);
 * - GICE_DEVICES_PER_RANK=4 (more devices than CPUs: none spins): the receiving CT 0 sleeps
 *   after each put, and nearly every put's kick wakes it.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. Skipped (exit 77) on a machine with fewer than two CPUs. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gice.h"
#include "tests/test_util.h"

#define PUTS 100u
#define BUF 4096u

/* The sender's kicks that woke the receiver's sleeping CT 0, over PUTS host-posted puts. */
static uint64_t kicks_woke_over_puts(const char *devices_per_rank)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 2, .hbm_bytes = 4 * BUF};
	gice_device_t *dev[2];
	uint8_t *buf[2];
	uint64_t key, src_key;
	gice_conn_t conn;
	gice_counter_t done;
	gice_stats_t before, after;
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
	ck_assert_int_eq(gice_device_stats(dev[0], &before), GICE_OK);
	for (uint32_t i = 0; i < PUTS; i++) {
		memset(buf[0], (int)i, 64);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = buf[0], .bytes = 64, .rkey = key,
				.roff = 64 * (i % (BUF / 64)), .signal = GICE_NO_COUNTER, .completion = done};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, (uint64_t)i + 1, test_scaled(20000), NULL),
				 GICE_OK);
		ck_assert_uint_eq(buf[1][64 * (i % (BUF / 64))], (uint8_t)i);
	}
	ck_assert_int_eq(gice_device_stats(dev[0], &after), GICE_OK);
	uint64_t woke = after.kicks_woke - before.kicks_woke;
	fprintf(stderr, "spin: GICE_DEVICES_PER_RANK=%s, 2 CPUs: %llu of %u puts woke the receiver's CT 0\n",
		devices_per_rank, (unsigned long long)woke, PUTS);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	return woke;
}

START_TEST(a_device_with_its_share_of_the_cpus_keeps_a_ct_spinning)
{
	ck_assert_uint_le(kicks_woke_over_puts("2"), PUTS / 2);
}
END_TEST

START_TEST(more_devices_than_cpus_spin_none)
{
	ck_assert_uint_ge(kicks_woke_over_puts("4"), PUTS / 2);
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
