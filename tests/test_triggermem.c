/* Description: trigger memory — region layout and attach validation, counter id allocation,
 * counter writes and reads, wraparound-safe compare, futex waits (wake, timeout, failure),
 * cross-process wake-ups, watch + dirty bitmaps + doorbells, and the MPSC request queue.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/triggermem/triggermem.h"
#include "tests/test_util.h"

#define MS 1000000ull

static tm_region_t *mk(uint32_t n_counters, uint32_t n_cts, uint32_t depth)
{
	tm_layout_t l = {.n_counters = n_counters, .n_cts = n_cts, .queue_depth = depth};
	tm_region_t *r = NULL;

	ck_assert_int_eq(tm_region_create(&l, "test", &r), GICE_OK);
	ck_assert_ptr_nonnull(r);
	return r;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- layout ---- */

START_TEST(test_layout_sizes)
{
	tm_region_t *r = mk(4096, 4, 256);
	const tm_layout_t *l = tm_region_layout(r);
	struct stat st;

	ck_assert_uint_eq(TM_SLOT_BYTES, 128);
	ck_assert_uint_eq(TM_REQ_MAX_BYTES, 120);
	ck_assert_uint_eq(l->n_counters, 4096);
	ck_assert_uint_eq(l->n_cts, 4);
	ck_assert_uint_eq(l->queue_depth, 256);

	/* header + state line + one line per counter and doorbell + 4 queues of (128 + 256 slots) */
	ck_assert_int_eq(fstat(tm_region_fd(r), &st), 0);
	uint64_t min = 128 + 64 + 4096ull * 64 + 4 * 64 + 4 * (128 + 256ull * 128);
	ck_assert_uint_ge((uint64_t)st.st_size, min);
	ck_assert_uint_lt((uint64_t)st.st_size, min + 4 * 4096 + 4 * 1024);
	ck_assert_uint_eq((uint64_t)st.st_size % 4096, 0);

	/* the header as another process sees it */
	uint8_t *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, tm_region_fd(r), 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(memcmp(p, "GICETRIG", 8), 0);
	uint32_t version;
	uint64_t total;
	memcpy(&version, p + 8, 4);
	memcpy(&total, p + 16, 8);
	ck_assert_uint_eq(version, 5);
	ck_assert_uint_eq(total, (uint64_t)st.st_size);
	munmap(p, (size_t)st.st_size);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_layout_invalid)
{
	tm_layout_t bad[] = {
		{.n_counters = 100, .n_cts = 2, .queue_depth = 8}, /* not a multiple of 64 */
		{.n_counters = 0, .n_cts = 2, .queue_depth = 8},
		{.n_counters = 64, .n_cts = 0, .queue_depth = 8},
		{.n_counters = 64, .n_cts = TM_MAX_CTS + 1, .queue_depth = 8},
		{.n_counters = 64, .n_cts = 2, .queue_depth = 12}, /* not a power of two */
		{.n_counters = 64, .n_cts = 2, .queue_depth = 1},
	};
	tm_region_t *r = (tm_region_t *)0x1;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(tm_region_create(&bad[i], "bad", &r), GICE_ERR_INVALID);
		ck_assert_ptr_eq(r, (tm_region_t *)0x1); /* output untouched on failure */
	}
}
END_TEST

START_TEST(test_params_table)
{
	uint64_t v;

	ck_assert_ptr_nonnull(gice_param_find(tm_params, "GICE_COUNTERS"));
	ck_assert_ptr_nonnull(gice_param_find(tm_params, "GICE_CT_QUEUE_DEPTH"));
	for (const gice_param_t *p = tm_params; p->name; p++) {
		ck_assert_ptr_nonnull(p->help);
		ck_assert_int_eq(gice_param_u64(p, &v), GICE_OK);
	}
	/* defaults (the effective values may come from the environment) */
	ck_assert_str_eq(gice_param_find(tm_params, "GICE_COUNTERS")->defval, "4096");
	ck_assert_str_eq(gice_param_find(tm_params, "GICE_CT_QUEUE_DEPTH")->defval, "256");
}
END_TEST

/* ---- allocation ---- */

START_TEST(test_alloc_exhaust_and_free)
{
	tm_region_t *r = mk(128, 3, 4);
	uint64_t seen[2] = {0, 0};
	uint32_t id, first = 0;

	for (uint32_t i = 0; i < 128 - 3; i++) {
		ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
		ck_assert_uint_ge(id, 3); /* 0..n_cts-1 are reserved */
		ck_assert_uint_lt(id, 128);
		ck_assert(!(seen[id / 64] & (1ull << (id % 64))));
		seen[id / 64] |= 1ull << (id % 64);
		if (i == 10)
			first = id;
	}
	id = 12345;
	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_ERR_NO_MEMORY);
	ck_assert_uint_eq(id, 12345);

	ck_assert_int_eq(tm_counter_free(r, 0), GICE_ERR_INVALID);
	ck_assert_int_eq(tm_counter_free(r, 2), GICE_ERR_INVALID);
	ck_assert_int_eq(tm_counter_free(r, 128), GICE_ERR_INVALID);
	ck_assert_int_eq(tm_counter_free(r, first), GICE_OK);
	ck_assert_int_eq(tm_counter_free(r, first), GICE_ERR_INVALID); /* double free */
	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	ck_assert_uint_eq(id, first);
	tm_region_destroy(r);
}
END_TEST

/* ---- writes and reads ---- */

START_TEST(test_add_set_fail_read_get)
{
	tm_region_t *r = mk(64, 1, 2);
	tm_counter_state_t st;
	uint32_t id;

	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	ck_assert_uint_eq(tm_counter_read(r, id), 0);
	uint64_t t0 = gice_now_ns();
	tm_counter_add(r, id, 5);
	tm_counter_add(r, id, 7);
	ck_assert_uint_eq(tm_counter_read(r, id), 12);
	tm_counter_get(r, id, &st);
	ck_assert_uint_eq(st.value, 12);
	ck_assert_uint_eq(st.fail, 0);
	ck_assert_int_eq(st.status, GICE_OK);
	ck_assert_uint_ge(st.ts_ns, t0);
	ck_assert_uint_le(st.ts_ns, gice_now_ns());

	tm_counter_set(r, id, 100);
	ck_assert_uint_eq(tm_counter_read(r, id), 100);
	tm_counter_fail(r, id, GICE_ERR_BAD_KEY);
	tm_counter_fail(r, id, GICE_ERR_PEER_DEAD);
	tm_counter_get(r, id, &st);
	ck_assert_uint_eq(st.value, 100);
	ck_assert_uint_eq(st.fail, 2);
	ck_assert_int_eq(st.status, GICE_ERR_PEER_DEAD);

	tm_counter_reset(r, id);
	tm_counter_get(r, id, &st);
	ck_assert_uint_eq(st.value, 0);
	ck_assert_uint_eq(st.fail, 0);
	ck_assert_int_eq(st.status, GICE_OK);
	tm_region_destroy(r);
}
END_TEST

/* ---- compare ---- */

START_TEST(test_wraparound_compare)
{
	uint64_t big = UINT64_MAX - 1;

	ck_assert(tm_cmp_ok(5, TM_CMP_EQ, 5));
	ck_assert(!tm_cmp_ok(5, TM_CMP_NE, 5));
	ck_assert(tm_cmp_ok(6, TM_CMP_GT, 5));
	ck_assert(!tm_cmp_ok(5, TM_CMP_GT, 5));
	ck_assert(tm_cmp_ok(5, TM_CMP_GE, 5));
	ck_assert(tm_cmp_ok(4, TM_CMP_LT, 5));
	ck_assert(tm_cmp_ok(5, TM_CMP_LE, 5));
	/* a counter that wrapped past zero is still "after" a threshold just below the wrap */
	ck_assert(tm_cmp_ok(1, TM_CMP_GE, big));
	ck_assert(tm_cmp_ok(1, TM_CMP_GT, big));
	ck_assert(!tm_cmp_ok(1, TM_CMP_LT, big));
	ck_assert(tm_cmp_ok(big, TM_CMP_LT, 1));
	ck_assert(tm_cmp_ok(big, TM_CMP_LE, 2));
	ck_assert(!tm_cmp_ok(big, TM_CMP_GE, 2));

	tm_region_t *r = mk(64, 1, 2);
	uint32_t id;
	uint64_t found = 0;
	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	tm_counter_set(r, id, big);
	tm_counter_add(r, id, 3); /* wraps to 1 */
	ck_assert_int_eq(tm_counter_wait(r, id, TM_CMP_GE, big + 2, 0, 0, &found), GICE_OK);
	ck_assert_uint_eq(found, 1);
	tm_region_destroy(r);
}
END_TEST

/* ---- waits ---- */

struct writer_arg {
	tm_region_t *r;
	uint32_t id;
	unsigned delay_ms;
	int fail_status; /* 0: add 1 */
};

static void *writer_main(void *p)
{
	struct writer_arg *a = p;

	sleep_ms(a->delay_ms);
	if (a->fail_status)
		tm_counter_fail(a->r, a->id, a->fail_status);
	else
		tm_counter_add(a->r, a->id, 1);
	return NULL;
}

START_TEST(test_wait_wakes_sleeper)
{
	tm_region_t *r = mk(64, 1, 2);
	struct writer_arg a = {.r = r, .delay_ms = 20};
	uint64_t found = 0;
	pthread_t t;

	ck_assert_int_eq(tm_counter_alloc(r, &a.id), GICE_OK);
	uint64_t t0 = gice_now_ns();
	ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &a), 0);
	/* the wait's CPU, not the thread's creation (which took most of 10.5 ms under TSan) */
	uint64_t c0 = thread_cpu_ns();
	/* spin 100 us only: the waiter must be asleep on the futex when the write lands */
	ck_assert_int_eq(tm_counter_wait(r, a.id, TM_CMP_GE, 1, test_scaled(5000 * MS), 100000, &found), GICE_OK);
	uint64_t el = gice_now_ns() - t0, cpu = thread_cpu_ns() - c0;
	pthread_join(t, NULL);
	ck_assert_uint_eq(found, 1);
	ck_assert_uint_ge(el, 15 * MS);
	ck_assert_uint_lt(el, test_scaled(2000 * MS));
	ck_assert_msg(cpu < 10 * MS, "waiter used %llu ns of CPU in %llu ns: it did not sleep",
		      (unsigned long long)cpu, (unsigned long long)el);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_wait_timeout)
{
	tm_region_t *r = mk(64, 1, 2);
	uint64_t found = 0;
	uint32_t id;

	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	tm_counter_set(r, id, 5);
	uint64_t t0 = gice_now_ns();
	ck_assert_int_eq(tm_counter_wait(r, id, TM_CMP_GE, 10, 30 * MS, 1 * MS, &found),
			 GICE_ERR_TIMED_OUT);
	uint64_t el = gice_now_ns() - t0;
	ck_assert_uint_eq(found, 5);
	ck_assert_uint_ge(el, 30 * MS);
	ck_assert_uint_lt(el, test_scaled(1000 * MS));

	/* zero timeout: one check */
	found = 0;
	ck_assert_int_eq(tm_counter_wait(r, id, TM_CMP_EQ, 6, 0, 0, &found), GICE_ERR_TIMED_OUT);
	ck_assert_uint_eq(found, 5);
	ck_assert_int_eq(tm_counter_wait(r, id, TM_CMP_EQ, 5, 0, 0, NULL), GICE_OK);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_wait_failure_status)
{
	tm_region_t *r = mk(64, 1, 2);
	struct writer_arg a = {.r = r, .delay_ms = 20, .fail_status = GICE_ERR_PEER_DEAD};
	uint64_t found = 99;
	pthread_t t;

	ck_assert_int_eq(tm_counter_alloc(r, &a.id), GICE_OK);
	tm_counter_set(r, a.id, 3);
	ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &a), 0);
	ck_assert_int_eq(tm_counter_wait(r, a.id, TM_CMP_GE, 10, 5000 * MS, 100000, &found),
			 GICE_ERR_PEER_DEAD);
	pthread_join(t, NULL);
	ck_assert_uint_eq(found, 3);
	/* a counter that already failed ends a wait at once */
	ck_assert_int_eq(tm_counter_wait(r, a.id, TM_CMP_GE, 10, 5000 * MS, 0, NULL), GICE_ERR_PEER_DEAD);
	tm_counter_reset(r, a.id);
	ck_assert_int_eq(tm_counter_wait(r, a.id, TM_CMP_GE, 10, 1 * MS, 0, NULL), GICE_ERR_TIMED_OUT);
	tm_region_destroy(r);
}
END_TEST

/* ---- cross-process ---- */

struct req {
	uint32_t producer;
	uint32_t seq;
	char text[16];
};

static int child_main(int fd, uint32_t id)
{
	tm_region_t *r;
	struct req q = {.producer = 7, .seq = 1, .text = "hello"};
	uint64_t ticket;

	if (tm_region_attach(fd, &r))
		return 10;
	sleep_ms(30); /* let the parent fall asleep in tm_counter_wait */
	tm_counter_add(r, id, 7);
	sleep_ms(30); /* and then in tm_doorbell_sleep */
	if (tm_queue_push(r, 1, &q, sizeof(q), &ticket) || ticket != 0)
		return 11;
	tm_region_destroy(r);
	return 0;
}

START_TEST(test_cross_process_wake)
{
	tm_region_t *r = mk(64, 2, 8);
	uint64_t found = 0, ticket = 99;
	uint8_t buf[TM_REQ_MAX_BYTES];
	uint32_t id;
	int status, got = 0;

	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child_main(tm_region_fd(r), id));

	ck_assert_int_eq(tm_counter_wait(r, id, TM_CMP_GE, 7, test_scaled(5000 * MS), 0, &found), GICE_OK);
	ck_assert_uint_eq(found, 7);

	/* the CT loop: read the doorbell, look for work, sleep while the doorbell is unchanged */
	uint64_t deadline = gice_now_ns() + test_scaled(5000 * MS);
	while (!got && gice_now_ns() < deadline) {
		uint32_t seen = tm_doorbell_seq(r, 1);
		got = tm_queue_pop(r, 1, buf, &ticket);
		if (!got)
			tm_doorbell_sleep(r, 1, seen, 1000 * MS);
	}
	ck_assert_int_eq(got, 1);
	ck_assert_uint_eq(ticket, 0);
	struct req q;
	memcpy(&q, buf, sizeof(q));
	ck_assert_uint_eq(q.producer, 7);
	ck_assert_str_eq(q.text, "hello");
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_attach_shares_state)
{
	tm_region_t *r = mk(256, 3, 16), *a = NULL;
	uint32_t id;

	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	ck_assert_int_eq(tm_region_attach(tm_region_fd(r), &a), GICE_OK);
	ck_assert_uint_eq(tm_region_layout(a)->n_counters, 256);
	ck_assert_uint_eq(tm_region_layout(a)->n_cts, 3);
	ck_assert_uint_eq(tm_region_layout(a)->queue_depth, 16);
	tm_counter_add(a, id, 41);
	tm_counter_add(r, id, 1);
	ck_assert_uint_eq(tm_counter_read(a, id), 42);
	ck_assert_uint_eq(tm_counter_read(r, id), 42);
	/* ids are owned by the creating process */
	ck_assert_int_eq(tm_counter_alloc(a, &id), GICE_ERR_UNSUPPORTED);
	tm_region_destroy(a);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_attach_invalid)
{
	tm_region_t *r = (tm_region_t *)0x1;
	uint8_t junk[8192];

	ck_assert_int_eq(tm_region_attach(-1, &r), GICE_ERR_INVALID);
	ck_assert_int_eq(tm_region_attach(1000000, &r), GICE_ERR_INVALID);

	/* empty file */
	int fd = memfd_create("empty", 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(tm_region_attach(fd, &r), GICE_ERR_INVALID);

	/* garbage */
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	ck_assert_int_eq(tm_region_attach(fd, &r), GICE_ERR_INVALID);

	/* a real region's bytes with the version changed, then with the size changed */
	tm_region_t *good = mk(64, 1, 2);
	struct stat st;
	ck_assert_int_eq(fstat(tm_region_fd(good), &st), 0);
	uint8_t *img = malloc((size_t)st.st_size);
	ck_assert_int_eq(pread(tm_region_fd(good), img, (size_t)st.st_size, 0), st.st_size);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(pwrite(fd, img, (size_t)st.st_size, 0), st.st_size);
	tm_region_t *ok = NULL;
	ck_assert_int_eq(tm_region_attach(fd, &ok), GICE_OK); /* the copy itself is fine */
	tm_region_destroy(ok);
	img[8] = 99; /* version */
	ck_assert_int_eq(pwrite(fd, img, (size_t)st.st_size, 0), st.st_size);
	ck_assert_int_eq(tm_region_attach(fd, &r), GICE_ERR_INVALID);
	img[8] = 1;
	ck_assert_int_eq(pwrite(fd, img, (size_t)st.st_size, 0), st.st_size);
	ck_assert_int_eq(ftruncate(fd, st.st_size + 4096), 0); /* size no longer matches */
	ck_assert_int_eq(tm_region_attach(fd, &r), GICE_ERR_INVALID);
	ck_assert_ptr_eq(r, (tm_region_t *)0x1);
	free(img);
	close(fd);
	tm_region_destroy(good);
}
END_TEST

/* ---- watch, dirty bitmaps, doorbells ---- */

START_TEST(test_watch_dirty_doorbell)
{
	tm_region_t *r = mk(256, 4, 8);
	uint32_t a, b, ids[8];

	ck_assert_int_eq(tm_counter_alloc(r, &a), GICE_OK);
	ck_assert_int_eq(tm_counter_alloc(r, &b), GICE_OK);
	tm_counter_watch(r, a, 2, 1);

	uint32_t s2 = tm_doorbell_seq(r, 2), s1 = tm_doorbell_seq(r, 1);
	tm_counter_add(r, a, 1);
	ck_assert_uint_ne(tm_doorbell_seq(r, 2), s2);
	ck_assert_uint_eq(tm_doorbell_seq(r, 1), s1);
	ck_assert_uint_eq(tm_dirty_take(r, 1, ids, 8), 0);
	ck_assert_uint_eq(tm_dirty_take(r, 2, ids, 8), 1);
	ck_assert_uint_eq(ids[0], a);
	ck_assert_uint_eq(tm_dirty_take(r, 2, ids, 8), 0);

	/* unwatched counter: no dirty bit, no ring */
	s2 = tm_doorbell_seq(r, 2);
	tm_counter_set(r, b, 5);
	tm_counter_fail(r, b, GICE_ERR_IO);
	ck_assert_uint_eq(tm_doorbell_seq(r, 2), s2);
	ck_assert_uint_eq(tm_dirty_take(r, 2, ids, 8), 0);

	/* fail on a watched counter notifies too; repeated writes leave one bit */
	tm_counter_fail(r, a, GICE_ERR_IO);
	tm_counter_add(r, a, 1);
	ck_assert_uint_eq(tm_dirty_take(r, 2, ids, 8), 1);
	ck_assert_uint_eq(ids[0], a);

	/* unwatch */
	tm_counter_watch(r, a, 2, 0);
	s2 = tm_doorbell_seq(r, 2);
	tm_counter_add(r, a, 1);
	ck_assert_uint_eq(tm_doorbell_seq(r, 2), s2);
	ck_assert_uint_eq(tm_dirty_take(r, 2, ids, 8), 0);

	/* explicit mark */
	tm_dirty_mark(r, 3, b);
	ck_assert_uint_ne(tm_doorbell_seq(r, 3), 0);
	ck_assert_uint_eq(tm_dirty_take(r, 3, ids, 8), 1);
	ck_assert_uint_eq(ids[0], b);
	tm_region_destroy(r);
}
END_TEST

/* Kicks count what they publish (tm_doorbell_sent) and ring only when no one is awake; a
 * count of 0 counts nothing; unsent takes a count back. */
START_TEST(test_kick_counts_and_rings_when_no_one_is_awake)
{
	tm_region_t *r = mk(64, 2, 8);

	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 0);
	tm_doorbell_awake(r, 0, 1);
	uint32_t s = tm_doorbell_seq(r, 0);
	tm_doorbell_kick(r, 0, 3, NULL);
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 3);
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s); /* someone awake: no ring */
	tm_doorbell_awake(r, 0, -1);
	tm_doorbell_kick(r, 0, 2, NULL);
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 5);
	ck_assert_uint_ne(tm_doorbell_seq(r, 0), s); /* no one awake: rung */
	s = tm_doorbell_seq(r, 0);
	ck_assert_uint_eq(tm_doorbell_pokes(r, 0), 0);
	tm_doorbell_kick(r, 0, 0, NULL); /* a poke: counted apart from the pieces, and rung */
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 5);
	ck_assert_uint_eq(tm_doorbell_pokes(r, 0), 1);
	ck_assert_uint_ne(tm_doorbell_seq(r, 0), s);
	tm_doorbell_awake(r, 0, 1);
	s = tm_doorbell_seq(r, 0);
	tm_doorbell_kick(r, 0, 0, NULL); /* someone awake: counted for it to see, not rung */
	ck_assert_uint_eq(tm_doorbell_pokes(r, 0), 2);
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s);
	tm_doorbell_kick(r, 0, 4, NULL);
	ck_assert_uint_eq(tm_doorbell_pokes(r, 0), 2);
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 9);
	ck_assert_uint_eq(tm_doorbell_sent(r, 1), 0); /* per CT */
	ck_assert_uint_eq(tm_doorbell_pokes(r, 1), 0);
	s = tm_doorbell_seq(r, 0);
	tm_doorbell_unsent(r, 0, 4); /* a send that failed takes back its count: nothing rung */
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 5);
	ck_assert_uint_eq(tm_doorbell_pokes(r, 0), 2);
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s);
	tm_region_destroy(r);
}
END_TEST

/* A lease (a kernel issuing nearby) takes the kicks that would ring: kick and nudge return its
 * end instead, until it lapses; someone awake still takes them first; the lease moves only by
 * more than half its length. */
START_TEST(test_lease_takes_kicks_until_it_lapses)
{
	tm_region_t *r = mk(64, 2, 8);
	uint64_t now = gice_now_ns(), len = 2000000000ull; /* 2 s: the test never sees it lapse */

	ck_assert_uint_eq(tm_doorbell_nudge(r, 0, NULL), 0); /* no lease: nothing to wait for */
	tm_doorbell_lease(r, 0, now, len);
	uint32_t s = tm_doorbell_seq(r, 0);
	ck_assert_uint_eq(tm_doorbell_kick(r, 0, 3, NULL), now + len);
	ck_assert_uint_eq(tm_doorbell_sent(r, 0), 3); /* counted: the lease holder's look finds it */
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s);  /* not rung */
	ck_assert_uint_eq(tm_doorbell_kick(r, 0, 0, NULL), now + len); /* a poke as well */
	ck_assert_uint_eq(tm_doorbell_nudge(r, 0, NULL), now + len);
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s);
	tm_doorbell_lease(r, 0, now + len / 2 - 1, len); /* not past half: unchanged */
	ck_assert_uint_eq(tm_doorbell_nudge(r, 0, NULL), now + len);
	tm_doorbell_lease(r, 0, now + len / 2 + 1, len); /* extended */
	ck_assert_uint_eq(tm_doorbell_nudge(r, 0, NULL), now + len / 2 + 1 + len);
	tm_doorbell_awake(r, 0, 1); /* someone awake: nothing left to nudge */
	ck_assert_uint_eq(tm_doorbell_kick(r, 0, 1, NULL), 0);
	ck_assert_uint_eq(tm_doorbell_seq(r, 0), s);
	tm_doorbell_awake(r, 0, -1);
	ck_assert_uint_eq(tm_doorbell_nudge(r, 1, NULL), 0); /* per CT: CT 1 has none */
	tm_region_destroy(r);
	/* lapsed: the kick rings, and so does a nudge */
	r = mk(64, 2, 8);
	tm_doorbell_lease(r, 0, gice_now_ns() - 2000000, 1000000); /* ended a millisecond ago */
	s = tm_doorbell_seq(r, 0);
	ck_assert_uint_eq(tm_doorbell_kick(r, 0, 1, NULL), 0);
	ck_assert_uint_ne(tm_doorbell_seq(r, 0), s);
	s = tm_doorbell_seq(r, 0);
	ck_assert_uint_eq(tm_doorbell_nudge(r, 0, NULL), 0);
	ck_assert_uint_ne(tm_doorbell_seq(r, 0), s);
	tm_region_destroy(r);
}
END_TEST

START_TEST(test_dirty_take_many)
{
	/* 8192 counters = 128 dirty words = two summary words */
	tm_region_t *r = mk(8192, 2, 2);
	static uint32_t ids[8192];
	static uint8_t hit[8192];
	uint32_t n_watched = 0, total = 0, n;

	for (uint32_t id = 2; id < 8192; id += 37) {
		tm_counter_watch(r, id, 1, 1);
		tm_counter_add(r, id, 1);
		n_watched++;
	}
	/* take in small batches: ids put back when the batch is full are not lost */
	while ((n = tm_dirty_take(r, 1, ids, 7)) > 0) {
		ck_assert_uint_le(n, 7);
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_uint_eq((ids[i] - 2) % 37, 0);
			ck_assert_uint_eq(hit[ids[i]], 0);
			hit[ids[i]] = 1;
		}
		total += n;
	}
	ck_assert_uint_eq(total, n_watched);
	ck_assert_uint_eq(tm_dirty_take(r, 0, ids, 8192), 0);
	tm_region_destroy(r);
}
END_TEST

struct ring_arg {
	tm_region_t *r;
	unsigned delay_ms;
};

static void *ringer_main(void *p)
{
	struct ring_arg *a = p;

	sleep_ms(a->delay_ms);
	tm_doorbell_ring(a->r, 0);
	return NULL;
}

START_TEST(test_doorbell_sleep)
{
	tm_region_t *r = mk(64, 1, 2);
	struct ring_arg a = {.r = r, .delay_ms = 20};
	pthread_t t;

	uint32_t seen = tm_doorbell_seq(r, 0);
	uint64_t t0 = gice_now_ns();
	ck_assert_int_eq(tm_doorbell_sleep(r, 0, seen, 20 * MS), GICE_ERR_TIMED_OUT);
	ck_assert_uint_ge(gice_now_ns() - t0, 20 * MS);

	/* stale seen value: no sleep */
	tm_doorbell_ring(r, 0);
	t0 = gice_now_ns();
	ck_assert_int_eq(tm_doorbell_sleep(r, 0, seen, 5000 * MS), GICE_OK);
	ck_assert_uint_lt(gice_now_ns() - t0, test_scaled(100 * MS));

	/* ring from another thread wakes the sleeper */
	seen = tm_doorbell_seq(r, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, ringer_main, &a), 0);
	t0 = gice_now_ns();
	while (tm_doorbell_seq(r, 0) == seen && gice_now_ns() - t0 < test_scaled(5000 * MS))
		tm_doorbell_sleep(r, 0, seen, 5000 * MS);
	ck_assert_uint_ne(tm_doorbell_seq(r, 0), seen);
	ck_assert_uint_lt(gice_now_ns() - t0, test_scaled(2000 * MS));
	pthread_join(t, NULL);
	tm_region_destroy(r);
}
END_TEST

/* ---- request queue ---- */

START_TEST(test_queue_order_and_full)
{
	tm_region_t *r = mk(64, 2, 8);
	uint8_t buf[TM_REQ_MAX_BYTES], big[TM_REQ_MAX_BYTES + 1];
	uint64_t ticket;
	uint32_t v;

	ck_assert_int_eq(tm_queue_pop(r, 1, buf, &ticket), 0);
	for (v = 0; v < 8; v++) {
		ck_assert_int_eq(tm_queue_push(r, 1, &v, sizeof(v), &ticket), GICE_OK);
		ck_assert_uint_eq(ticket, v);
	}
	ck_assert_int_eq(tm_queue_push(r, 1, &v, sizeof(v), &ticket), GICE_ERR_AGAIN);
	ck_assert_uint_eq(tm_queue_prod(r, 1), 8);
	ck_assert_uint_eq(tm_queue_prod(r, 0), 0); /* other queue untouched */

	memset(buf, 0xff, sizeof(buf));
	ck_assert_int_eq(tm_queue_pop(r, 1, buf, &ticket), 1);
	ck_assert_uint_eq(ticket, 0);
	memcpy(&v, buf, 4);
	ck_assert_uint_eq(v, 0);
	ck_assert_uint_eq(buf[4], 0); /* payload past len is zeroed */
	ck_assert_uint_eq(buf[TM_REQ_MAX_BYTES - 1], 0);

	v = 8;
	ck_assert_int_eq(tm_queue_push(r, 1, &v, sizeof(v), &ticket), GICE_OK);
	ck_assert_uint_eq(ticket, 8);
	for (uint32_t want = 1; want <= 8; want++) {
		ck_assert_int_eq(tm_queue_pop(r, 1, buf, &ticket), 1);
		memcpy(&v, buf, 4);
		ck_assert_uint_eq(v, want);
		ck_assert_uint_eq(ticket, want);
	}
	ck_assert_int_eq(tm_queue_pop(r, 1, buf, &ticket), 0);

	/* a full-size request fits; one byte more does not */
	memset(big, 0x5a, sizeof(big));
	ck_assert_int_eq(tm_queue_push(r, 1, big, TM_REQ_MAX_BYTES, NULL), GICE_OK);
	ck_assert_int_eq(tm_queue_push(r, 1, big, TM_REQ_MAX_BYTES + 1, NULL), GICE_ERR_INVALID);
	ck_assert_int_eq(tm_queue_pop(r, 1, buf, NULL), 1);
	ck_assert_int_eq(memcmp(buf, big, TM_REQ_MAX_BYTES), 0);
	tm_region_destroy(r);
}
END_TEST

#define N_PROD 4
#define N_ITEMS 10000

struct prod_arg {
	tm_region_t *r;
	uint32_t producer;
};

static void *producer_main(void *p)
{
	struct prod_arg *a = p;

	for (uint32_t i = 0; i < N_ITEMS; i++) {
		struct req q = {.producer = a->producer, .seq = i};
		while (tm_queue_push(a->r, 0, &q, sizeof(q), NULL) == GICE_ERR_AGAIN)
			sched_yield(); /* full: let the consumer run */
	}
	return NULL;
}

START_TEST(test_queue_mpsc)
{
	tm_region_t *r = mk(64, 1, 256);
	struct prod_arg pa[N_PROD];
	pthread_t t[N_PROD];
	uint32_t next[N_PROD] = {0};
	uint8_t buf[TM_REQ_MAX_BYTES];
	uint64_t ticket, want_ticket = 0;
	uint32_t total = 0;

	for (uint32_t i = 0; i < N_PROD; i++) {
		pa[i] = (struct prod_arg){.r = r, .producer = i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, producer_main, &pa[i]), 0);
	}
	uint64_t deadline = gice_now_ns() + 20000 * MS;
	while (total < N_PROD * N_ITEMS && gice_now_ns() < deadline) {
		uint32_t seen = tm_doorbell_seq(r, 0);
		if (!tm_queue_pop(r, 0, buf, &ticket)) {
			tm_doorbell_sleep(r, 0, seen, 100 * MS);
			continue;
		}
		struct req q;
		memcpy(&q, buf, sizeof(q));
		ck_assert_uint_lt(q.producer, N_PROD);
		ck_assert_uint_eq(q.seq, next[q.producer]); /* per-producer order, each item once */
		next[q.producer]++;
		ck_assert_uint_eq(ticket, want_ticket);
		want_ticket++;
		total++;
	}
	for (uint32_t i = 0; i < N_PROD; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(total, N_PROD * N_ITEMS);
	for (uint32_t i = 0; i < N_PROD; i++)
		ck_assert_uint_eq(next[i], N_ITEMS);
	ck_assert_int_eq(tm_queue_pop(r, 0, buf, &ticket), 0);
	ck_assert_uint_eq(tm_queue_prod(r, 0), N_PROD * N_ITEMS);
	tm_region_destroy(r);
}
END_TEST

/* ---- suite ---- */

static void add(Suite *s, const char *name, const TTest *fn)
{
	TCase *tc = tcase_create(name);

	tcase_add_test(tc, fn);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
}

int main(void)
{
	Suite *s = suite_create("triggermem");
	SRunner *sr;
	int failed;

	add(s, "layout_sizes", test_layout_sizes);
	add(s, "layout_invalid", test_layout_invalid);
	add(s, "params_table", test_params_table);
	add(s, "alloc_exhaust_and_free", test_alloc_exhaust_and_free);
	add(s, "add_set_fail_read_get", test_add_set_fail_read_get);
	add(s, "wraparound_compare", test_wraparound_compare);
	add(s, "wait_wakes_sleeper", test_wait_wakes_sleeper);
	add(s, "wait_timeout", test_wait_timeout);
	add(s, "wait_failure_status", test_wait_failure_status);
	add(s, "cross_process_wake", test_cross_process_wake);
	add(s, "attach_shares_state", test_attach_shares_state);
	add(s, "attach_invalid", test_attach_invalid);
	add(s, "watch_dirty_doorbell", test_watch_dirty_doorbell);
	add(s, "dirty_take_many", test_dirty_take_many);
	add(s, "kick_counts_and_rings_when_no_one_is_awake", test_kick_counts_and_rings_when_no_one_is_awake);
	add(s, "lease_takes_kicks_until_it_lapses", test_lease_takes_kicks_until_it_lapses);
	add(s, "doorbell_sleep", test_doorbell_sleep);
	add(s, "queue_order_and_full", test_queue_order_and_full);
	add(s, "queue_mpsc", test_queue_mpsc);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
