/* Description: symmetric memory (issue 10): the heap and the puts, gets and signals named by
 * (team rank, heap offset) with no key exchanged by the program, on 4 devices of one process.
 * put_signal to the right neighbour and a get back from it around the ring (1000 and 100000
 * bytes); gice_sym_alloc gives the same offsets (256-byte aligned, first fit, holes reused) and
 * gice_sym_counter_alloc the same counter ids on every device, never a plain counter's;
 * docs/api.md's ring allreduce written with symmetric puts and signals only; and the heap comes
 * out of the communication pool, which a larger one does not fit. The same ring and allreduce
 * across processes: test_sym_procs.c. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/gice.h"
#include "tests/test_sym.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- symmetric put, get, signal */

START_TEST(sym_put_signal_and_get_around_a_ring_of_four_devices)
{
	static const size_t sizes[] = {1000, 100000};
	struct ring_args a = {.team = gice_team_world(), .bytes = sizes[_i]};

	ck_assert_ptr_nonnull(a.team);
	ck_assert_uint_eq(gice_team_size(a.team), NDEV);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.src), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.dst), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.back), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&a.sig), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&a.done), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_team_rank(a.team, dev[i]), i);
		uint8_t *s = gice_sym_ptr(dev[i], a.src);
		for (size_t j = 0; j < a.bytes; j++)
			s[j] = pat((uint32_t)i, j);
	}
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_launch(str[i], ring_kernel, 1, &a, sizeof(a)), GICE_OK);
	sync_all(GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		uint32_t left = (uint32_t)(i + NDEV - 1) % NDEV, right = (uint32_t)(i + 1) % NDEV;
		const uint8_t *d = gice_sym_ptr(dev[i], a.dst), *b = gice_sym_ptr(dev[i], a.back);
		for (size_t j = 0; j < a.bytes; j++) {
			ck_assert_msg(d[j] == pat(left, j), "device %d byte %zu from the left", i, j);
			ck_assert_msg(b[j] == pat(right, j), "device %d byte %zu got from the right", i, j);
		}
		ck_assert_uint_eq(gice_counter_read(dev[i], a.sig), 1);
	}
}
END_TEST

START_TEST(sym_alloc_gives_the_same_offsets_and_counter_ids_everywhere)
{
	uint64_t o1, o2, o3;
	gice_counter_t c1, c2, plain;

	ck_assert_int_eq(gice_sym_alloc(100, &o1), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(5000, &o2), GICE_OK);
	ck_assert_uint_eq(o1, 0);
	ck_assert_uint_eq(o2, 256); /* 256-byte aligned, first fit */
	ck_assert_int_eq(gice_sym_free(o1), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(200, &o3), GICE_OK);
	ck_assert_uint_eq(o3, 0); /* the hole is reused */
	ck_assert_int_eq(gice_sym_counter_alloc(&c1), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&c2), GICE_OK);
	ck_assert_uint_ne(c1, c2);
	for (int i = 0; i < NDEV; i++) {
		gice_counter_state_t st;
		ck_assert_int_eq(gice_counter_get(dev[i], c1, &st), GICE_OK);
		ck_assert_uint_eq(st.value, 0);
		ck_assert_ptr_eq(gice_sym_ptr(dev[i], o2), (uint8_t *)gice_sym_ptr(dev[i], 0) + 256);
		/* a plain counter is never one of the symmetric ids */
		ck_assert_int_eq(gice_counter_alloc(dev[i], &plain), GICE_OK);
		ck_assert_uint_ne(plain, c1);
		ck_assert_uint_ne(plain, c2);
	}
	ck_assert_int_eq(gice_sym_counter_free(c1), GICE_OK);
	ck_assert_ptr_null(gice_sym_ptr(dev[0], HEAP));
	ck_assert_uint_eq(gice_sym_heap_bytes(), HEAP);
}
END_TEST

/* ---------------------------------------------------------------- a hand-written ring allreduce
 * (allreduce_check, test_sym.h) */

START_TEST(a_ring_allreduce_written_with_symmetric_puts_and_signals)
{
	ck_assert_int_eq(allreduce_check(dev, str, NDEV, NDEV * 3000), 0);
}
END_TEST

/* ---------------------------------------------------------------- the heap's memory */

/* A communication pool of 2 MiB: the heap comes out of it, and one larger than it does not fit. */
static void open_devices_comm_pool(void)
{
	setenv("GICE_COMM_POOL_BYTES", "2m", 1);
	open_devices();
}

START_TEST(the_heap_comes_from_the_communication_pool)
{
	gice_pool_usage_t u;

	ck_assert_int_eq(gice_sym_init(4u << 20), GICE_ERR_NO_MEMORY);
	ck_assert_ptr_null(gice_team_world());
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_pool_usage(dev[i], GICE_POOL_COMM, &u), GICE_OK);
		ck_assert_uint_eq(u.bytes, 2u << 20);
		ck_assert_uint_ge(u.used, HEAP);
		ck_assert_int_eq(gice_pool_usage(dev[i], GICE_POOL_COMPUTE, &u), GICE_OK);
		ck_assert_uint_lt(u.used, HEAP);
	}
}
END_TEST

int main(void)
{
	struct sym_case cases[] = {
		{"sym_ring", sym_put_signal_and_get_around_a_ring_of_four_devices, 2, setup, NULL},
		{"allreduce", a_ring_allreduce_written_with_symmetric_puts_and_signals, 1, setup, NULL},
		{"sym_alloc", sym_alloc_gives_the_same_offsets_and_counter_ids_everywhere, 1, setup, NULL},
		{"comm_pool", the_heap_comes_from_the_communication_pool, 1, open_devices_comm_pool, NULL},
	};

	return test_run_suite(sym_suite("sym_heap", cases, sizeof(cases) / sizeof(cases[0])));
}
