/* Description: emulated device memory (emu/hbm): allocator alignment, splitting and coalescing,
 * out-of-memory, frees of non-allocations and of registered memory, key uniqueness, remote
 * (key) and local (offset) translation with their bounds, and lock-free translation racing with
 * (de)registration. One TCase per behaviour. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/hbm/hbm.h"

#define ARENA (16u << 20)
#define KiB 1024ull

static hbm_t *h;

static void setup(void)
{
	ck_assert_int_eq(hbm_create(ARENA, "test-hbm", &h), GICE_OK);
}

static void teardown(void)
{
	hbm_destroy(h);
	h = NULL;
}

START_TEST(test_create_rounds_to_page)
{
	hbm_t *x;

	ck_assert_int_eq(hbm_create(HBM_PAGE_SIZE + 1, "test-round", &x), GICE_OK);
	ck_assert_uint_eq(hbm_size(x), 2 * HBM_PAGE_SIZE);
	ck_assert_uint_eq(hbm_free_bytes(x), 2 * HBM_PAGE_SIZE);
	ck_assert_int_ge(hbm_fd(x), 0);
	memset(hbm_base(x), 0xab, hbm_size(x)); /* the whole arena is mapped */
	hbm_destroy(x);
}
END_TEST

START_TEST(test_alloc_alignment)
{
	static const uint64_t aligns[] = {0, 1, 8, 256, 4096, 65536, 1u << 20};
	uint64_t off, first;

	/* misalign the free list first */
	ck_assert_int_eq(hbm_alloc(h, 1, 0, &first), GICE_OK);
	for (unsigned i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		uint64_t want = aligns[i] < HBM_MIN_ALIGN ? HBM_MIN_ALIGN : aligns[i];

		ck_assert_int_eq(hbm_alloc(h, 100 + i, aligns[i], &off), GICE_OK);
		ck_assert_uint_eq(off % want, 0);
		ck_assert_uint_lt(off, hbm_size(h));
	}
	ck_assert_int_eq(hbm_alloc(h, 100, 3, &off), GICE_ERR_INVALID);
	ck_assert_int_eq(hbm_alloc(h, 0, 256, &off), GICE_ERR_INVALID);
}
END_TEST

START_TEST(test_alloc_free_coalesce)
{
	uint64_t off[64], all, total = hbm_free_bytes(h);

	ck_assert_uint_eq(total, ARENA);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(hbm_alloc(h, 1000 + (uint64_t)i * 4093, 256u << (i % 6), &off[i]), GICE_OK);
	ck_assert_uint_lt(hbm_free_bytes(h), total);
	/* free in an interleaved order so that merges with the previous, the next and both
	 * neighbours all happen */
	for (int i = 0; i < 64; i += 2)
		ck_assert_int_eq(hbm_free(h, off[i]), GICE_OK);
	for (int i = 63; i > 0; i -= 2)
		ck_assert_int_eq(hbm_free(h, off[i]), GICE_OK);
	ck_assert_uint_eq(hbm_free_bytes(h), total);
	/* one free block again: all of it in one allocation */
	ck_assert_int_eq(hbm_alloc(h, total, 0, &all), GICE_OK);
	ck_assert_uint_eq(all, 0);
	ck_assert_uint_eq(hbm_free_bytes(h), 0);
	ck_assert_int_eq(hbm_free(h, all), GICE_OK);
	ck_assert_uint_eq(hbm_free_bytes(h), total);
}
END_TEST

START_TEST(test_alloc_oom_status)
{
	uint64_t a, b, off, before;

	ck_assert_int_eq(hbm_alloc(h, ARENA / 2, 0, &a), GICE_OK);
	ck_assert_int_eq(hbm_alloc(h, 4 * KiB, 0, &b), GICE_OK);
	before = hbm_free_bytes(h);
	off = 0x1234;
	ck_assert_int_eq(hbm_alloc(h, ARENA / 2, 0, &off), GICE_ERR_NO_MEMORY);
	ck_assert_uint_eq(off, 0x1234); /* output untouched on failure */
	ck_assert_uint_eq(hbm_free_bytes(h), before);
	ck_assert_int_eq(hbm_alloc(h, UINT64_MAX, 0, &off), GICE_ERR_NO_MEMORY);
	ck_assert_int_eq(hbm_alloc(h, 16, 1ull << 62, &off), GICE_ERR_NO_MEMORY);
	ck_assert_uint_eq(hbm_free_bytes(h), before);
	/* a fitting request still works afterwards */
	ck_assert_int_eq(hbm_alloc(h, before, 0, &off), GICE_OK);
}
END_TEST

START_TEST(test_free_non_allocation_invalid)
{
	uint64_t off;

	ck_assert_int_eq(hbm_free(h, 0), GICE_ERR_INVALID);
	ck_assert_int_eq(hbm_alloc(h, 4096, 0, &off), GICE_OK);
	ck_assert_int_eq(hbm_free(h, off + 256), GICE_ERR_INVALID); /* inside, not the start */
	ck_assert_int_eq(hbm_free(h, UINT64_MAX), GICE_ERR_INVALID);
	ck_assert_int_eq(hbm_free(h, off), GICE_OK);
	ck_assert_int_eq(hbm_free(h, off), GICE_ERR_INVALID); /* double free */
}
END_TEST

START_TEST(test_free_while_registered_busy)
{
	uint64_t off, key;

	ck_assert_int_eq(hbm_alloc(h, 256 * KiB, 0, &off), GICE_OK);
	ck_assert_int_eq(hbm_register(h, off + 1000, 5000, &key), GICE_OK);
	ck_assert_int_eq(hbm_free(h, off), GICE_ERR_BUSY);
	ck_assert_int_eq(hbm_deregister(h, key), GICE_OK);
	ck_assert_int_eq(hbm_deregister(h, key), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(hbm_free(h, off), GICE_OK);
}
END_TEST

START_TEST(test_register_outside_allocation_invalid)
{
	uint64_t off, key = 7;

	ck_assert_int_eq(hbm_alloc(h, 1000, 0, &off), GICE_OK);
	ck_assert_int_eq(hbm_register(h, off, 1001, &key), GICE_ERR_INVALID);     /* past the end */
	ck_assert_int_eq(hbm_register(h, off + 10, 0, &key), GICE_ERR_INVALID);   /* empty */
	ck_assert_int_eq(hbm_register(h, off + 1024, 16, &key), GICE_ERR_INVALID); /* unallocated */
	ck_assert_int_eq(hbm_register(h, off + 8, UINT64_MAX - 4, &key), GICE_ERR_INVALID); /* wraps */
	ck_assert_uint_eq(key, 7);
	ck_assert_int_eq(hbm_register(h, off, 1000, &key), GICE_OK);
}
END_TEST

START_TEST(test_register_distinct_keys)
{
	enum { N = 500 };
	uint64_t off, keys[N];

	ck_assert_int_eq(hbm_alloc(h, 1u << 20, 0, &off), GICE_OK);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(hbm_register(h, off + (uint64_t)i * 512, 512, &keys[i]), GICE_OK);
		ck_assert_uint_ne(keys[i], 0);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(keys[i], keys[j]);
	}
	for (int i = 0; i < N; i++) {
		uint64_t t;
		ck_assert_int_eq(hbm_translate_key(h, keys[i], 0, 512, &t), GICE_OK);
		ck_assert_uint_eq(t, off + (uint64_t)i * 512);
	}
	for (int i = 0; i < N; i += 2)
		ck_assert_int_eq(hbm_deregister(h, keys[i]), GICE_OK);
	for (int i = 0; i < N; i++) {
		uint64_t t;
		ck_assert_int_eq(hbm_translate_key(h, keys[i], 0, 1, &t), i % 2 ? GICE_OK : GICE_ERR_BAD_KEY);
	}
}
END_TEST

START_TEST(test_register_table_full_overflow)
{
	hbm_t *x;
	uint64_t off, key;

	setenv("GICE_HBM_MAX_REGIONS", "4", 1);
	ck_assert_int_eq(hbm_create(1u << 20, "test-full", &x), GICE_OK);
	unsetenv("GICE_HBM_MAX_REGIONS");
	ck_assert_int_eq(hbm_alloc(x, 4096, 0, &off), GICE_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(hbm_register(x, off, 4096, &key), GICE_OK);
	ck_assert_int_eq(hbm_register(x, off, 4096, &key), GICE_ERR_OVERFLOW);
	ck_assert_int_eq(hbm_deregister(x, key), GICE_OK);
	ck_assert_int_eq(hbm_register(x, off, 4096, &key), GICE_OK);
	hbm_destroy(x);
}
END_TEST

START_TEST(test_translate_key_bounds)
{
	uint64_t off, key, t = 99;
	const uint64_t len = 10000;

	ck_assert_int_eq(hbm_alloc(h, 64 * KiB, 0, &off), GICE_OK);
	ck_assert_int_eq(hbm_register(h, off + 100, len, &key), GICE_OK);
	ck_assert_int_eq(hbm_translate_key(h, key ^ 1, 0, 1, &t), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(hbm_translate_key(h, 0, 0, 1, &t), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(hbm_translate_key(h, key, len, 1, &t), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(hbm_translate_key(h, key, 1, len, &t), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(hbm_translate_key(h, key, len + 1, 0, &t), GICE_ERR_OUT_OF_BOUNDS);
	/* roff + len wraps past 2^64 to something small */
	ck_assert_int_eq(hbm_translate_key(h, key, 16, UINT64_MAX - 7, &t), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(hbm_translate_key(h, key, UINT64_MAX, 2, &t), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_uint_eq(t, 99);
	ck_assert_int_eq(hbm_translate_key(h, key, 0, len, &t), GICE_OK); /* exactly the region */
	ck_assert_uint_eq(t, off + 100);
	ck_assert_int_eq(hbm_translate_key(h, key, len - 8, 8, &t), GICE_OK); /* up to the exact end */
	ck_assert_uint_eq(t, off + 100 + len - 8);
	ck_assert_int_eq(hbm_translate_key(h, key, len, 0, &t), GICE_OK); /* zero length at the end */
	ck_assert_uint_eq(t, off + 100 + len);
}
END_TEST

START_TEST(test_translate_local)
{
	uint64_t off, key, k2, k = 5;

	ck_assert_int_eq(hbm_alloc(h, 1u << 20, 0, &off), GICE_OK);
	ck_assert_int_eq(hbm_translate_local(h, off, 16, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_register(h, off + 1000, 200 * KiB, &key), GICE_OK);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000, 200 * KiB, &k), GICE_OK);
	ck_assert_uint_eq(k, key);
	k = 5;
	ck_assert_int_eq(hbm_translate_local(h, off + 70 * KiB, 64 * KiB, &k), GICE_OK);
	ck_assert_uint_eq(k, key);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000, 1, NULL), GICE_OK);
	k = 5;
	/* straddles the end, and the start */
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB - 8, 9, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_translate_local(h, off + 999, 8, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000, UINT64_MAX, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_translate_local(h, hbm_size(h), 1, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_translate_local(h, UINT64_MAX, 2, &k), GICE_ERR_UNREGISTERED);
	ck_assert_uint_eq(k, 5);

	/* a second region in the same 64 KiB page as the first one's end: the page table has
	 * several candidates and the lookup falls back to a scan */
	ck_assert_int_eq(hbm_register(h, off + 1000 + 200 * KiB, 4096, &k2), GICE_OK);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB - 8, 8, &k), GICE_OK);
	ck_assert_uint_eq(k, key);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB, 8, &k), GICE_OK);
	ck_assert_uint_eq(k, k2);
	/* adjacent regions do not join: a range across both is not inside one region */
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB - 8, 16, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_deregister(h, k2), GICE_OK);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB, 8, &k), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000 + 200 * KiB - 8, 8, &k), GICE_OK);
	ck_assert_uint_eq(k, key);
	ck_assert_int_eq(hbm_deregister(h, key), GICE_OK);
	ck_assert_int_eq(hbm_translate_local(h, off + 1000, 8, &k), GICE_ERR_UNREGISTERED);
}
END_TEST

/* ---- concurrency: translators against a registering/deregistering thread ---- */

static struct {
	uint64_t base;     /* start of the allocation */
	uint64_t roff;     /* stable region */
	uint64_t rlen;
	uint64_t key;
	_Atomic int stop;
	_Atomic uint64_t wrong;
	_Atomic uint64_t lookups;
} race;

/* xorshift: per-thread, no shared state */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *translator(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1, n = 0;

	while (!atomic_load_explicit(&race.stop, memory_order_relaxed)) {
		uint64_t r = next_rand(&s), o = r % race.rlen, l = (r >> 32) % (race.rlen - o) + 1, t, k;

		if (hbm_translate_key(h, race.key, o, l, &t) != GICE_OK || t != race.roff + o)
			atomic_fetch_add(&race.wrong, 1);
		if (hbm_translate_local(h, race.roff + o, l, &k) != GICE_OK || k != race.key)
			atomic_fetch_add(&race.wrong, 1);
		/* just past the stable region: never covered by any region */
		if (hbm_translate_local(h, race.roff + race.rlen, 1, &k) != GICE_ERR_UNREGISTERED)
			atomic_fetch_add(&race.wrong, 1);
		if (hbm_translate_key(h, race.key + 1, 0, 1, &t) != GICE_ERR_BAD_KEY)
			atomic_fetch_add(&race.wrong, 1);
		n++;
	}
	atomic_fetch_add(&race.lookups, n);
	return NULL;
}

START_TEST(test_translate_concurrent_with_register)
{
	enum { CHURN = 14 };
	pthread_t th[2];
	uint64_t keys[CHURN], start, rounds = 0, other;

	/* a small table (16 slots, 32 hash buckets) so that keys collide and deletions shift the
	 * stable key's hash entry while translators look it up */
	hbm_destroy(h);
	setenv("GICE_HBM_MAX_REGIONS", "16", 1);
	ck_assert_int_eq(hbm_create(ARENA, "test-race", &h), GICE_OK);
	unsetenv("GICE_HBM_MAX_REGIONS");

	/* stable region [base+64K+256, base+192K+256): its first and last pages are shared with churn
	 * regions [base, base+64K+256) and [base+192K+512, base+320K+256), so the page table flips
	 * between single and several owners while the translators run */
	ck_assert_int_eq(hbm_alloc(h, 512 * KiB, 0, &race.base), GICE_OK);
	ck_assert_int_eq(hbm_alloc(h, 512 * KiB, 0, &other), GICE_OK);
	race.roff = race.base + 64 * KiB + 256;
	race.rlen = 128 * KiB;
	ck_assert_int_eq(hbm_register(h, race.roff, race.rlen, &race.key), GICE_OK);
	atomic_store(&race.stop, 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, translator, (void *)(uintptr_t)(i + 1)), 0);

	start = gice_now_ns();
	while (gice_now_ns() - start < 500000000ull) {
		ck_assert_int_eq(hbm_register(h, race.base, 64 * KiB + 256, &keys[0]), GICE_OK);
		ck_assert_int_eq(hbm_register(h, race.roff + race.rlen + 256, 128 * KiB - 256, &keys[1]), GICE_OK);
		for (int i = 2; i < CHURN; i++)
			ck_assert_int_eq(hbm_register(h, other + (uint64_t)i * 4096, 70 * KiB, &keys[i]), GICE_OK);
		for (int i = 0; i < CHURN; i++)
			ck_assert_int_eq(hbm_deregister(h, keys[i]), GICE_OK);
		rounds++;
	}
	atomic_store(&race.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("concurrent: %llu register rounds, %llu lookups of 4 translations, %llu wrong\n",
	       (unsigned long long)rounds, (unsigned long long)atomic_load(&race.lookups),
	       (unsigned long long)atomic_load(&race.wrong));
	ck_assert_uint_eq(atomic_load(&race.wrong), 0);
	ck_assert_uint_gt(atomic_load(&race.lookups), 0);
	ck_assert_uint_gt(rounds, 0);
}
END_TEST

static Suite *hbm_suite(void)
{
	Suite *s = suite_create("hbm");
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
		{"create_rounds_to_page", test_create_rounds_to_page},
		{"alloc_alignment", test_alloc_alignment},
		{"alloc_free_coalesce", test_alloc_free_coalesce},
		{"alloc_oom_status", test_alloc_oom_status},
		{"free_non_allocation_invalid", test_free_non_allocation_invalid},
		{"free_while_registered_busy", test_free_while_registered_busy},
		{"register_outside_allocation_invalid", test_register_outside_allocation_invalid},
		{"register_distinct_keys", test_register_distinct_keys},
		{"register_table_full_overflow", test_register_table_full_overflow},
		{"translate_key_bounds", test_translate_key_bounds},
		{"translate_local", test_translate_local},
		{"translate_concurrent_with_register", test_translate_concurrent_with_register},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_set_timeout(tc, 30);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hbm_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
