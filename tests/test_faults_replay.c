/* Description: which packets a fault hits is decided by the fault-injecting endpoint's seed
 * alone, over a real shm endpoint pair of this process (test_faults.h). The same seed gives the
 * same received sequence (ids, lengths and CRCs) and the same counts, another seed another; with
 * reordering, the same set and counts. A send the inner endpoint refuses with GICE_ERR_AGAIN is
 * retried with its decision, so a run starved of tx buffers drops the same packets as an easy
 * one. Faults can be turned on and off with fab_fault_set from the sending thread, and changed
 * from another thread while this one sends; reorder and delay are refused on an endpoint that
 * promised order. */
#include <check.h>
#include <pthread.h>
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

/* One run of N packets through a fresh pair with faults spec; returns the received records and the
 * counts. */
static void run_once(const char *spec, uint64_t n, size_t max, rx_t *rx, fab_fault_stats_t *st)
{
	gice_faults_t f = faults(spec);
	unsigned char *buf = malloc(max);
	pair_t p;

	rx_init(rx, max, RX_RAW);
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < n; i++)
		send_id(&p, i, buf, rx);
	*st = stats_of(p.a);
	settle(&p, rx, n - st->dropped + st->duplicated, 20);
	pair_close(&p);
	free(buf);
}

static int same_records(const rx_t *x, const rx_t *y)
{
	if (x->n != y->n)
		return 0;
	for (size_t i = 0; i < x->n; i++)
		if (x->r[i].len != y->r[i].len || x->r[i].crc != y->r[i].crc || x->r[i].id != y->r[i].id)
			return 0;
	return 1;
}

static int cmp_rec(const void *a, const void *b)
{
	const rec_t *x = a, *y = b;

	if (x->crc != y->crc)
		return x->crc < y->crc ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

START_TEST(test_same_seed_same_sequence)
{
	enum { N = 400 };
	const size_t max = 512;
	rx_t r1, r2, r3;
	fab_fault_stats_t s1, s2, s3;

	/* packets are lost and bits flipped: compare what arrived (id read, length, crc) */
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=21", N, max, &r1, &s1);
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=21", N, max, &r2, &s2);
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=22", N, max, &r3, &s3);
	print_stats("seed 21", &s1);
	print_stats("seed 22", &s3);
	ck_assert(s1.dropped && s1.duplicated && s1.corrupted);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	ck_assert_msg(same_records(&r1, &r2), "same seed, different received sequence");
	ck_assert(memcmp(&s1, &s3, sizeof(s1)) || !same_records(&r1, &r3));
	ck_assert_msg(!same_records(&r1, &r3), "another seed, the same received sequence");
	rx_free(&r1);
	rx_free(&r2);
	rx_free(&r3);

	/* with reordering the arrival order depends on timing (the 1 ms limit), the set and the
	 * counts do not */
	run_once("drop=0.1,reorder=0.2,seed=8", N, max, &r1, &s1);
	run_once("drop=0.1,reorder=0.2,seed=8", N, max, &r2, &s2);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	qsort(r1.r, r1.n, sizeof(rec_t), cmp_rec);
	qsort(r2.r, r2.n, sizeof(rec_t), cmp_rec);
	ck_assert(same_records(&r1, &r2));
	rx_free(&r1);
	rx_free(&r2);
}
END_TEST

/* GICE_ERR_AGAIN from the inner endpoint: the packet is retried with its decision, so the packets
 * dropped are the same as in a run without AGAIN. */
START_TEST(test_again_keeps_decision)
{
	enum { N = 300 };
	const size_t max = 65536; /* above the inject size: every send takes a tx buffer */
	gice_faults_t f = faults("drop=0.5,seed=77");
	unsigned char *buf = malloc(max);
	fab_fault_stats_t s1, s2;
	rx_t r1, r2;
	int again = 0;
	pair_t p;

	/* easy: deep queues, the receiver polled after every send */
	rx_init(&r1, max, RX_BY_ID);
	pair_open(&p, "shm", max, 256, &f);
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &r1);
		pump(&p, &r1);
	}
	s1 = stats_of(p.a);
	settle(&p, &r1, N - s1.dropped, 10);
	pair_close(&p);

	/* hard: 4 tx buffers and the receiver not polled until sends fail */
	rx_init(&r2, max, RX_BY_ID);
	pair_open(&p, "shm", max, 4, &f);
	for (uint64_t i = 0; i < N; i++)
		again += send_id(&p, i, buf, &r2);
	s2 = stats_of(p.a);
	settle(&p, &r2, N - s2.dropped, 10);
	pair_close(&p);
	printf("again: %d sends refused with GICE_ERR_AGAIN and retried; %llu dropped both times\n", again,
	       (unsigned long long)s1.dropped);
	ck_assert_int_gt(again, 0);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	ck_assert(same_records(&r1, &r2));
	rx_free(&r2);
	rx_free(&r1);
	free(buf);
}
END_TEST

typedef struct {
	fab_ep_t *ep;
	_Atomic int stop;
	_Atomic int sets;
	int fails;
} setter_t;

static void *setter(void *arg)
{
	setter_t *s = arg;
	gice_faults_t on = faults("drop=0.5,corrupt=0,seed=12");

	while (!atomic_load(&s->stop)) {
		on.seed++;
		if (fab_fault_set(s->ep, (s->sets & 1) ? NULL : &on) != GICE_OK)
			s->fails++;
		s->sets++;
		usleep(50);
	}
	return NULL;
}

START_TEST(test_set_while_sending)
{
	enum { N = 3000 };
	const size_t max = 256;
	unsigned char *buf = malloc(max);
	gice_faults_t all = faults("drop=1"), reorder = faults("reorder=0.1");
	fab_fault_stats_t st, st0;
	setter_t s = {0};
	pthread_t th;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, NULL);
	/* on and off from this thread */
	ck_assert_int_eq(fab_fault_set(p.a, &all), GICE_OK);
	for (uint64_t i = 0; i < 50; i++)
		send_id(&p, i, buf, &rx);
	st0 = stats_of(p.a);
	ck_assert_uint_eq(st0.sent, 50);
	ck_assert_uint_eq(st0.dropped, 50);
	ck_assert_int_eq(fab_fault_set(p.a, NULL), GICE_OK);
	for (uint64_t i = 50; i < 100; i++)
		send_id(&p, i, buf, &rx);
	settle(&p, &rx, 50, 10);
	ck_assert_uint_eq(rx.r[0].id, 50);
	st = stats_of(p.a);
	ck_assert(!memcmp(&st, &st0, sizeof(st))); /* fault-free sends are not counted */
	/* reorder/delay on an endpoint that promised order: refused */
	ck_assert_int_eq(fab_fault_set(p.a, &reorder), GICE_ERR_UNSUPPORTED);
	reorder.rule[0].p = 2;
	ck_assert_int_eq(fab_fault_set(p.a, &reorder), GICE_ERR_INVALID);

	/* from another thread, while this one sends */
	s.ep = p.a;
	ck_assert_int_eq(pthread_create(&th, NULL, setter, &s), 0);
	/* N sends, and on until the setter has changed the faults a few times (a loaded machine
	 * may not have run it yet) */
	uint64_t i = 100;
	for (; i < 100 + N || (atomic_load(&s.sets) < 3 && i < 100 + 50 * N); i++) {
		send_id(&p, i, buf, &rx);
		if (i % 16 == 0)
			pump(&p, &rx);
	}
	const int n_sent = (int)(i - 100);
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	st = stats_of(p.a);
	settle(&p, &rx, 50 + n_sent - (st.dropped - 50), 10);
	printf("set while sending: %d sets, %llu of %d packets dropped\n", atomic_load(&s.sets),
	       (unsigned long long)(st.dropped - 50), n_sent);
	ck_assert_int_eq(s.fails, 0);
	ck_assert_int_gt(atomic_load(&s.sets), 2);
	ck_assert_uint_eq(st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

int main(void)
{
	struct fault_case cases[] = {
		{"same_seed_same_sequence", test_same_seed_same_sequence, 0, "shm"},
		{"again_keeps_decision", test_again_keeps_decision, 0, "shm"},
		{"set_while_sending", test_set_while_sending, 0, "shm"},
	};

	return fault_main("faults_replay", cases, sizeof(cases) / sizeof(cases[0]));
}
