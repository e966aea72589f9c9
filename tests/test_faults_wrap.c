/* Description: what each network fault of the fault-injecting endpoint (fab_fault) does to the
 * packets of a real libfabric endpoint pair of this process (test_faults.h). Without faults, or
 * with an empty spec, the wrapper is transparent over shm and over tcp on loopback: every packet
 * arrives once and in order, with the inner endpoint's properties, quiet and in-flight answers,
 * and nothing counted; bad arguments leave the inner endpoint with the caller. drop: exactly the
 * packets missing are the ones counted, order kept; dup: the copies counted arrive twice, each
 * right after its original; corrupt: a packet differs in at most one bit, and the corrupted
 * count is the number that do; reorder and delay: every packet arrives once, some after a later
 * one, and the wrapper is never quiet while it may hold packets. */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"
#include "tests/test_faults.h"

/* ================================================================ the wrapper */

static const char *const clean_providers[] = {"shm", "tcp"};

START_TEST(test_wrap_no_faults_in_order)
{
	enum { N = 500 };
	const size_t max = 4096;
	const char *prov = clean_providers[_i];
	unsigned char *buf = malloc(max);
	gice_faults_t none = faults("");
	fab_fault_stats_t st;
	fab_ep_t *raw;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, prov, max, 0, _i ? &none : NULL);
	ck_assert_str_eq(p.a->provider, p.b->provider);
	ck_assert_int_eq(p.a->ordered, p.b->ordered);
	ck_assert_int_eq(p.a->ordered, 1);
	ck_assert_int_eq(p.a->reliable, 1);
	ck_assert_int_eq(p.a->rma, p.b->rma);
	ck_assert_uint_eq(p.a->max_packet, max);
	ck_assert_uint_eq(p.b->max_packet, max);
	ck_assert_int_eq(fab_wait_fd(p.a), fab_wait_fd(p.inner));
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		pump(&p, &rx);
	}
	settle(&p, &rx, N, 20);
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(rx.r[i].id, i);
	/* settled, nothing of the sender's own is in flight: the wrapper says so as its inner
	 * endpoint does (the engine then polls only for what peers announced) */
	ck_assert_int_eq(fab_quiet(p.inner), 1);
	ck_assert_int_eq(fab_quiet(p.a), 1);
	ck_assert_int_eq(fab_in_flight(p.inner), 0);
	ck_assert_int_eq(fab_in_flight(p.a), 0);
	st = stats_of(p.a);
	ck_assert_uint_eq(st.sent + st.dropped + st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	/* oversize through the wrapper: the inner endpoint's answer */
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 16, buf, max), GICE_ERR_INVALID);
	/* not a wrapper */
	ck_assert_int_eq(fab_fault_stats(p.b, &st), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_set(p.b, &none), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_stats(p.a, NULL), GICE_ERR_INVALID);
	pair_close(&p);
	/* bad arguments leave inner with the caller */
	fab_attr_t attr = {.provider = prov, .max_packet = max};
	gice_faults_t bad = faults("drop=0.5");
	bad.rule[0].p = 1.5;
	ck_assert_int_eq(fab_open(&attr, &raw), GICE_OK);
	ck_assert_int_eq(fab_fault_wrap(raw, &bad, 0, NULL, &p.a), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_wrap(raw, NULL, 0, NULL, NULL), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_wrap(NULL, NULL, 0, NULL, &p.a), GICE_ERR_INVALID);
	fab_close(raw);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_drop_counted)
{
	enum { N = 1000 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("drop=0.3,seed=11");
	fab_fault_stats_t st;
	char *seen = calloc(N, 1);
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 1); /* drops do not reorder */
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("drop=0.3", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.dropped, N / 5);
	ck_assert_uint_lt(st.dropped, N * 2 / 5);
	ck_assert_uint_eq(st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	settle(&p, &rx, N - st.dropped, 30);
	for (size_t i = 0; i < rx.n; i++) {
		ck_assert_uint_lt(rx.r[i].id, N);
		ck_assert_msg(!seen[rx.r[i].id], "packet %llu twice", (unsigned long long)rx.r[i].id);
		seen[rx.r[i].id] = 1;
		if (i)
			ck_assert_uint_gt(rx.r[i].id, rx.r[i - 1].id);
	}
	pair_close(&p);
	free(seen);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_dup_counted)
{
	enum { N = 600 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("dup=0.25,seed=5");
	fab_fault_stats_t st;
	int *times = calloc(N, sizeof(int));
	uint64_t twice = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("dup=0.25", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.duplicated, N / 8);
	ck_assert_uint_eq(st.dropped + st.reordered + st.delayed + st.corrupted, 0);
	settle(&p, &rx, N + st.duplicated, 30);
	for (size_t i = 0; i < rx.n; i++) {
		ck_assert_uint_lt(rx.r[i].id, N);
		times[rx.r[i].id]++;
		if (i) /* the copy comes right after the original */
			ck_assert_uint_ge(rx.r[i].id, rx.r[i - 1].id);
	}
	for (size_t i = 0; i < N; i++) {
		ck_assert_msg(times[i] == 1 || times[i] == 2, "packet %zu arrived %d times", i, times[i]);
		twice += times[i] == 2;
	}
	ck_assert_uint_eq(twice, st.duplicated);
	pair_close(&p);
	free(times);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_corrupt_one_bit)
{
	enum { N = 600 };
	const size_t max = 2048;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("corrupt=0.2,seed=9");
	fab_fault_stats_t st;
	uint64_t bad = 0, in_hdr = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_POS); /* a flipped bit may hit the id */
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("corrupt=0.2", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.corrupted, N / 10);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.reordered + st.delayed, 0);
	settle(&p, &rx, N, 20);
	for (size_t i = 0; i < N; i++) {
		ck_assert_msg(rx.r[i].diff_bits <= 1, "packet %zu: %d bits differ", i, rx.r[i].diff_bits);
		bad += rx.r[i].diff_bits == 1;
		in_hdr += rx.r[i].diff_bits == 1 && rx.r[i].id != i;
	}
	ck_assert_uint_eq(bad, st.corrupted);
	printf("corrupt: %llu packets with one bit flipped, %llu of them in the id\n", (unsigned long long)bad,
	       (unsigned long long)in_hdr);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

/* All N ids arrived exactly once, whatever the order; returns how many came after a larger id. */
static uint64_t check_all_once(const rx_t *rx, uint64_t n)
{
	char *seen = calloc(n, 1);
	uint64_t late = 0, top = 0;

	ck_assert_uint_eq(rx->n, n);
	for (size_t i = 0; i < rx->n; i++) {
		ck_assert_uint_lt(rx->r[i].id, n);
		ck_assert_msg(!seen[rx->r[i].id], "packet %llu twice", (unsigned long long)rx->r[i].id);
		seen[rx->r[i].id] = 1;
		if (i && rx->r[i].id < top)
			late++;
		top = GICE_MAX(top, rx->r[i].id);
	}
	free(seen);
	return late;
}

START_TEST(test_reorder_delivers_all)
{
	enum { N = 600 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("reorder=0.2,seed=3");
	fab_fault_stats_t st;
	uint64_t late;
	int saw_hold = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 0);
	ck_assert_int_eq(p.b->ordered, 1);
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		if (atomic_load(&p.a->held) && !saw_hold) {
			/* a held packet: poll before sleeping */
			ck_assert_int_eq(fab_trywait(p.a), GICE_ERR_AGAIN);
			saw_hold = 1;
		}
	}
	ck_assert(saw_hold);
	/* the last one may wait for its 1 ms */
	settle(&p, &rx, N, 10);
	st = stats_of(p.a);
	print_stats("reorder=0.2", &st);
	late = check_all_once(&rx, N);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.reordered, N / 10);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.delayed + st.corrupted, 0);
	ck_assert_uint_gt(late, 0);
	printf("reorder: %llu packets arrived after a later one\n", (unsigned long long)late);
	ck_assert_int_eq(fab_trywait(p.a), fab_trywait(p.b)); /* nothing held: the inner answer (shm: no fd) */
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_delay_delivers_all)
{
	enum { N = 300 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("delay_us=2000,seed=4");
	fab_fault_stats_t st;
	uint64_t t0, late;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 0);
	t0 = gice_now_ns();
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		pump(&p, &rx);
		if (i % 8 == 0)
			usleep(100); /* spread the sends over more than the delay */
	}
	settle(&p, &rx, N, 10);
	/* with a network fault on, a poll may have held copies to send: never quiet */
	ck_assert_int_eq(fab_quiet(p.inner), 1);
	ck_assert_int_eq(fab_quiet(p.a), 0);
	ck_assert_int_eq(fab_in_flight(p.inner), 0);
	ck_assert_int_eq(fab_in_flight(p.a), 1);
	st = stats_of(p.a);
	print_stats("delay_us=2000", &st);
	late = check_all_once(&rx, N);
	ck_assert_uint_eq(st.sent, N);
	/* pool of 64 holds: sends beyond it go straight out, so not every packet is delayed */
	ck_assert_uint_gt(st.delayed, N / 4);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.reordered + st.corrupted, 0);
	printf("delay: %llu of %d packets arrived after a later one, all in %.1f ms\n", (unsigned long long)late, N,
	       (gice_now_ns() - t0) / 1e6);
	ck_assert_uint_gt(late, 0);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

int main(void)
{
	struct fault_case cases[] = {
		{"wrap_no_faults_in_order", test_wrap_no_faults_in_order, 2, "shm tcp"},
		{"drop_counted", test_drop_counted, 0, "shm"},
		{"dup_counted", test_dup_counted, 0, "shm"},
		{"corrupt_one_bit", test_corrupt_one_bit, 0, "shm"},
		{"reorder_delivers_all", test_reorder_delivers_all, 0, "shm"},
		{"delay_delivers_all", test_delay_delivers_all, 0, "shm"},
	};

	return fault_main("faults_wrap", cases, sizeof(cases) / sizeof(cases[0]));
}
