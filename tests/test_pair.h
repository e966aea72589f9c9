/* test_pair.h: two devices of this process, connected both ways, for the Check binaries of who
 * makes the link progress (test_progress.c, test_leases.c): each with a 1 MiB buffer registered
 * (buf, key), a signal counter the other puts to (sig), a stream (strm) and n_cts CTs. */
#ifndef GICE_TEST_PAIR_H
#define GICE_TEST_PAIR_H

#include <check.h>
#include <time.h>

#include "api/gice.h"
#include "tests/test_dev.h"

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t now_ms(void) { return now_us() / 1000u; }

#define BUF (1024u * 1024u)

static gice_device_t *dev[2];
static uint8_t *buf[2];
static uint64_t key[2];
static gice_conn_t conn[2];    /* dev[i] -> dev[1 - i] */
static gice_counter_t sig[2];  /* on dev[i], signalled by the other */
static gice_stream_t *strm[2];

static uint32_t n_cts = 2; /* CTs per device */

static void open_pair(void)
{
	gice_device_attr_t at = {.n_sms = 2, .n_cts = n_cts, .hbm_bytes = 4 * BUF};

	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < 2; i++) {
		test_dev_open(&at, BUF, &dev[i], &buf[i], &key[i]);
		ck_assert_int_eq(gice_counter_alloc(dev[i], &sig[i]), GICE_OK);
		ck_assert_int_eq(gice_stream_create(dev[i], &strm[i]), GICE_OK);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_conn_open(dev[i], gice_device_id(dev[1 - i]), NULL, &conn[i]), GICE_OK);
}

static void close_pair(void)
{
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(gice_stream_destroy(strm[i]), GICE_OK);
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	}
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

#endif
