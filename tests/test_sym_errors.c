/* Description: the exact errors of symmetric memory and teams (issue 10), each a status
 * returned and a message logged that names the cause, on 4 devices of one process. From a
 * kernel: a team rank outside the team, a put or get reaching outside the heap, no team, a fence
 * to a rank outside the team (and gice_sym_peer_ptr: NULL outside the heap, the peer's memory
 * inside); the completion counter records the error the call returned. From the host: an empty
 * allocation, one larger than the heap, freeing what was never allocated, a second
 * gice_sym_init, a strided split past the parent's ranks or of stride 0, destroying the world,
 * and every call after gice_sym_fini. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_sym.h"
#include "tests/test_util.h"

/* What gice logs (stderr) between capture_begin and capture_end, into text. */
static int saved_stderr = -1;
static char capture_path[] = "/tmp/gice-sym-log-XXXXXX";

static void capture_begin(void)
{
	memcpy(capture_path + sizeof(capture_path) - 7, "XXXXXX", 6); /* mkstemp filled it last time */
	int fd = mkstemp(capture_path);

	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved_stderr = dup(2);
	ck_assert_int_ge(dup2(fd, 2), 0);
	close(fd);
}

static void capture_end(char *text, size_t len)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	f = fopen(capture_path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, len - 1, f);
	text[n] = 0;
	fclose(f);
	unlink(capture_path);
}

#define ASSERT_LOGGED(text, what) ck_assert_msg(strstr(text, what), "not logged: %s\nlogged: %s", what, text)

/* ---------------------------------------------------------------- negative cases */

struct neg_args {
	gice_team_t *team;
	gice_counter_t done;
	int *rc;
};

static void neg_kernel(gice_kctx_t *k, void *p)
{
	struct neg_args *a = p;
	void *src = gice_sym_ptr(k->dev, 0);

	a->rc[0] = gice_sym_put(k, a->team, NDEV, 0, src, 8, a->done);
	a->rc[1] = gice_sym_put(k, a->team, 1, HEAP - 10, src, 100, GICE_NO_COUNTER);
	a->rc[2] = gice_sym_get(k, a->team, 1, src, HEAP, 1, GICE_NO_COUNTER);
	a->rc[3] = gice_sym_signal(k, a->team, 7, 0, 1, 0, GICE_NO_COUNTER);
	a->rc[4] = gice_sym_put(k, NULL, 0, 0, src, 8, GICE_NO_COUNTER);
	a->rc[5] = gice_sym_peer_ptr(k, a->team, 1, HEAP - 4, 8) == NULL;
	a->rc[6] = gice_sym_peer_ptr(k, a->team, 1, 64, 8) == (uint8_t *)gice_sym_ptr(dev[1], 64);
	a->rc[7] = gice_sym_fence(k, a->team, 9);
}

START_TEST(bad_team_rank_and_offset_outside_the_heap_fail_exactly)
{
	static int rc[8];
	struct neg_args a = {.team = gice_team_world(), .rc = rc};
	gice_counter_state_t st;

	static char text[8192];

	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.done), GICE_OK);
	capture_begin();
	ck_assert_int_eq(gice_launch(str[0], neg_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_sym_put on device 0: team rank 4 out of range (team of 4)");
	ASSERT_LOGGED(text, "gice_sym_put on device 0: offset 1048566 + 100 bytes outside the 1048576-byte symmetric heap");
	ASSERT_LOGGED(text, "gice_sym_get on device 0: offset 1048576 + 1 bytes outside the 1048576-byte symmetric heap");
	ASSERT_LOGGED(text, "gice_sym_signal on device 0: team rank 7 out of range (team of 4)");
	ASSERT_LOGGED(text, "gice_sym_put on device 0: no team");
	ck_assert_int_eq(rc[0], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[1], GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(rc[2], GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(rc[3], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[4], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[5], 1);
	ck_assert_int_eq(rc[6], 1);
	ck_assert_int_eq(rc[7], GICE_ERR_INVALID);
	/* the completion records the error the call returned */
	ck_assert_int_eq(gice_counter_get(dev[0], a.done, &st), GICE_OK);
	ck_assert_int_eq(st.status, GICE_ERR_INVALID);
	ck_assert_uint_eq(st.fail, 1);
}
END_TEST

START_TEST(bad_allocations_and_splits_fail_exactly)
{
	uint64_t off;
	gice_team_t *t;

	static char text[8192];

	capture_begin();
	ck_assert_int_eq(gice_sym_alloc(0, &off), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_alloc(HEAP + 1, &off), GICE_ERR_NO_MEMORY);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_sym_alloc of 0 bytes: empty");
	ASSERT_LOGGED(text, "gice_sym_alloc of 1048577 bytes: no room in the 1048576-byte symmetric heap (largest hole 1048576)");
	ck_assert_int_eq(gice_sym_free(12345), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_ERR_INVALID); /* already */
	capture_begin();
	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 2, 2, 2, &t), GICE_ERR_INVALID);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_team_split_strided(start 2, stride 2, size 2): rank 4 is past the parent's 4 ranks");
	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 0, 0, 2, &t), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_team_destroy(gice_team_world()), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_fini(), GICE_OK);
	ck_assert_int_eq(gice_sym_fini(), GICE_ERR_INVALID);
	ck_assert_ptr_null(gice_team_world());
	ck_assert_int_eq(gice_sym_alloc(64, &off), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_counter_alloc(&(gice_counter_t){0}), GICE_ERR_INVALID);
	ck_assert_ptr_null(gice_sym_ptr(dev[0], 0));
}
END_TEST

int main(void)
{
	struct sym_case cases[] = {
		{"negative_device", bad_team_rank_and_offset_outside_the_heap_fail_exactly, 1, setup, NULL},
		{"negative_host", bad_allocations_and_splits_fail_exactly, 1, setup, NULL},
	};

	return test_run_suite(sym_suite("sym_errors", cases, sizeof(cases) / sizeof(cases[0])));
}
