/* Description: collectives (issue 10): gice_coll_allreduce of every type with every operator
 * against a host reference (and reduce_scatter, reduce with every operator and root, allgather,
 * broadcast from every root, alltoall and alltoallv, every type), on teams of 1, 2, 3 and 4 devices of one
 * process and across 2, 3, 4, 5 and 8 processes (shm with the NVLink plane; 3 over tcp without
 * it), with the one-shot and the ring algorithm, in place and out of place, for counts 0, 1,
 * primes, sizes not divisible by the chunk (256 bytes here) and larger than one round of the
 * scratch (64 KiB here); called from a kernel 1000 times in a row alternating algorithms, and
 * a persistent allreduce fired 1000 times by one trigger write each, with the host idle; the ring under injected drops, duplicates, reordering and corruption over tcp;
 * and the exact errors of a team without gice_coll_init, avg on an integer type, bad type, a
 * device outside the team, a buffer past the heap.
 * Integers must be exact. Floats: the test values make every sum, product, min and max exact in
 * every type (multiples of 1/4 up to 8, products of powers of two), so they must be exact too;
 * avg (one rounding of sum / n, plus the rounding of half types at each ring step) must be
 * within (n + 1) * eps * max(|ref|, 1), eps the type's unit roundoff. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_coll_ref.h"
#include "tests/test_job.h"

#define NDEV 4
#define HEAP (4u << 20)
#define BUF (8 * 1021 * 8) /* the largest buffer: 8 ranks x 1021 int64 (reduce_scatter, alltoall) */

static gice_device_t *dev[NDEV];
static gice_stream_t *str[NDEV];
static gice_team_t *team[NDEV + 1]; /* team[n]: devices 0 .. n-1 */
static uint64_t A, B;               /* heap offsets, BUF bytes each */

static const size_t counts[] = {0, 1, 7, 61, 1021, MAXC};

/* ---------------------------------------------------------------- one process, four devices */

static void setup_algo(const char *algo)
{
	setenv("GICE_ALGO", algo, 1);
	setenv("GICE_CHUNK_BYTES", "256", 1);
	setenv("GICE_COLL_SCRATCH_BYTES", "64k", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
		ck_assert_int_eq(gice_device_open(&a, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_stream_create(dev[i], &str[i]), GICE_OK);
	}
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_OK);
	team[NDEV] = gice_team_world();
	for (uint32_t n = 1; n < NDEV; n++)
		ck_assert_int_eq(gice_team_split_strided(team[NDEV], 0, 1, n, &team[n]), GICE_OK);
	for (uint32_t n = 1; n <= NDEV; n++)
		ck_assert_int_eq(gice_coll_init(team[n]), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(BUF, &A), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(BUF, &B), GICE_OK);
}

static void setup_ring(void) { setup_algo("ring"); }
static void setup_oneshot(void) { setup_algo("oneshot"); }
static void setup_auto(void) { setup_algo("auto"); }

static void teardown(void)
{
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_destroy(str[i]), GICE_OK);
	ck_assert_int_eq(gice_sym_fini(), GICE_OK);
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
	unsetenv("GICE_ALGO");
	unsetenv("GICE_CHUNK_BYTES");
	unsetenv("GICE_COLL_SCRATCH_BYTES");
}

/* Every type x op x count, in place and out of place, on the team of n devices. */
static int run_matrix(gice_device_t *const *d, gice_stream_t *const *s, uint32_t n_local, gice_team_t *t,
		      const size_t *cnts, size_t n_cnts, const char *who)
{
	uint32_t n = gice_team_size(t);

	for (int ty = 0; ty < GICE_DTYPE_COUNT; ty++)
		for (int op = 0; op < GICE_REDOP_COUNT; op++) {
			if (op == GICE_RED_AVG && !is_float((gice_dtype_t)ty))
				continue;
			for (size_t ci = 0; ci < n_cnts; ci++)
				for (int inplace = 0; inplace < 2; inplace++) {
					size_t count = cnts[ci];
					uint64_t recv = inplace ? A : B;
					for (uint32_t i = 0; i < n_local; i++) {
						fill(gice_sym_ptr(d[i], A), (gice_dtype_t)ty, (gice_redop_t)op,
						     (uint32_t)gice_team_rank(t, d[i]), count);
						if (!inplace)
							memset(gice_sym_ptr(d[i], B), 0xab, BUF);
					}
					for (uint32_t i = 0; i < n_local; i++)
						if (gice_coll_allreduce(s[i], t, A, recv, count, (gice_dtype_t)ty,
									(gice_redop_t)op))
							return 1;
					for (uint32_t i = 0; i < n_local; i++)
						if (gice_stream_sync(s[i], 0))
							return 2;
					for (uint32_t i = 0; i < n_local; i++)
						if (check(gice_sym_ptr(d[i], recv), (gice_dtype_t)ty, (gice_redop_t)op, n, count,
							  who))
							return 3;
				}
		}
	return 0;
}

static int sync_local(gice_stream_t *const *s, uint32_t n_local)
{
	for (uint32_t i = 0; i < n_local; i++)
		if (gice_stream_sync(s[i], 0))
			return 1;
	return 0;
}

/* reduce_scatter, reduce (every op), allgather, broadcast, alltoall: every type and count, in
 * place and out of place where the call has it, roots taking turns. */
static int run_others(gice_device_t *const *d, gice_stream_t *const *s, uint32_t n_local, gice_team_t *t,
		      const size_t *cnts, size_t n_cnts, const char *who)
{
	uint32_t n = gice_team_size(t);

	for (int ty = 0; ty < GICE_DTYPE_COUNT; ty++)
		for (size_t ci = 0; ci < n_cnts; ci++) {
			gice_dtype_t T = (gice_dtype_t)ty;
			size_t count = cnts[ci], esz = esize(T);
			uint32_t root = (uint32_t)(ci + (size_t)ty) % n;
			for (int op = 0; op < GICE_REDOP_COUNT; op++) {
				if (op == GICE_RED_AVG && !is_float(T))
					continue;
				for (int inplace = 0; inplace < 2; inplace++) {
					uint64_t recv[NDEV];
					for (uint32_t i = 0; i < n_local; i++) { /* reduce_scatter */
						uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
						fill(gice_sym_ptr(d[i], A), T, (gice_redop_t)op, r, n * count);
						recv[i] = inplace ? A + r * count * esz : B;
						if (gice_coll_reduce_scatter(s[i], t, A, recv[i], count, T, (gice_redop_t)op))
							return 1;
					}
					if (sync_local(s, n_local))
						return 2;
					for (uint32_t i = 0; i < n_local; i++) {
						uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
						if (check_at(gice_sym_ptr(d[i], recv[i]), T, (gice_redop_t)op, n, count, r * count,
							     "reduce_scatter"))
							return 3;
					}
					for (uint32_t i = 0; i < n_local; i++) { /* reduce */
						uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
						fill(gice_sym_ptr(d[i], A), T, (gice_redop_t)op, r, count);
						if (gice_coll_reduce(s[i], t, A, inplace ? A : B, count, T, (gice_redop_t)op, root))
							return 4;
					}
					if (sync_local(s, n_local))
						return 5;
					for (uint32_t i = 0; i < n_local; i++)
						if ((uint32_t)gice_team_rank(t, d[i]) == root &&
						    check(gice_sym_ptr(d[i], inplace ? A : B), T, (gice_redop_t)op, n, count, "reduce"))
							return 6;
				}
			}
			for (int inplace = 0; inplace < 2; inplace++) {
				uint64_t send[NDEV];
				for (uint32_t i = 0; i < n_local; i++) { /* allgather */
					uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
					send[i] = inplace ? B + r * count * esz : A;
					memset(gice_sym_ptr(d[i], B), 0xab, BUF);
					fill(gice_sym_ptr(d[i], send[i]), T, GICE_RED_SUM, r, count);
					if (gice_coll_allgather(s[i], t, send[i], B, count, T))
						return 7;
				}
				if (sync_local(s, n_local))
					return 8;
				for (uint32_t i = 0; i < n_local; i++)
					for (uint32_t b = 0; b < n; b++)
						if (expect_block((uint8_t *)gice_sym_ptr(d[i], B) + b * count * esz, T, b, 0, count,
								 "allgather"))
							return 9;
				for (uint32_t i = 0; i < n_local; i++) { /* broadcast */
					uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
					fill(gice_sym_ptr(d[i], A), T, GICE_RED_SUM, r, count);
					if (gice_coll_broadcast(s[i], t, A, inplace ? A : B, count, T, root))
						return 10;
				}
				if (sync_local(s, n_local))
					return 11;
				for (uint32_t i = 0; i < n_local; i++)
					if (expect_block(gice_sym_ptr(d[i], inplace ? A : B), T, root, 0, count, "broadcast"))
						return 12;
			}
			for (uint32_t i = 0; i < n_local; i++) { /* alltoall */
				uint32_t r = (uint32_t)gice_team_rank(t, d[i]);
				fill(gice_sym_ptr(d[i], A), T, GICE_RED_SUM, r, n * count);
				if (gice_coll_alltoall(s[i], t, A, B, count, T))
					return 13;
			}
			if (sync_local(s, n_local))
				return 14;
			for (uint32_t i = 0; i < n_local; i++) {
				uint32_t j = (uint32_t)gice_team_rank(t, d[i]);
				for (uint32_t r = 0; r < n; r++)
					if (expect_block((uint8_t *)gice_sym_ptr(d[i], B) + r * count * esz, T, r, j * count, count,
							 "alltoall"))
						return 15;
			}
			/* alltoallv: rank r sends v_cnt(r, j) elements to j, packed in send; j spreads what
			 * it receives in rank order with a gap of r elements before rank r's block */
			size_t sc[NDEV][8], sd[NDEV][8], rd[NDEV][8];
			for (uint32_t i = 0; i < n_local; i++) {
				uint32_t me = (uint32_t)gice_team_rank(t, d[i]);
				size_t so = 0, ro = 0;
				for (uint32_t j = 0; j < n; j++) {
					sc[i][j] = v_cnt(me, j, ci, count);
					sd[i][j] = so;
					for (size_t e = 0; e < sc[i][j]; e++)
						put_elem(gice_sym_ptr(d[i], A), T, so + e, hash(me, j * 1000 + e),
							 fval(me, j * 1000 + e, GICE_RED_SUM));
					so += sc[i][j];
					ro += j;
					rd[i][j] = ro;
					ro += v_cnt(j, me, ci, count);
				}
				if (gice_coll_alltoallv(s[i], t, A, sc[i], sd[i], B, rd[i], T))
					return 16;
			}
			if (sync_local(s, n_local))
				return 17;
			for (uint32_t i = 0; i < n_local; i++) {
				uint32_t me = (uint32_t)gice_team_rank(t, d[i]);
				for (uint32_t r = 0; r < n; r++)
					if (expect_block((uint8_t *)gice_sym_ptr(d[i], B) + rd[i][r] * esz, T, r, me * 1000,
							 v_cnt(r, me, ci, count), "alltoallv"))
						return 18;
			}
		}
	return 0;
}

static const size_t other_counts[] = {0, 1, 7, 61, 1021};

START_TEST(other_collectives_match_the_host_reference)
{
	uint32_t n = (uint32_t)_i + 1;

	ck_assert_int_eq(run_others(dev, str, n, team[n], other_counts, sizeof(other_counts) / sizeof(other_counts[0]),
				    "one process"),
			 0);
}
END_TEST

START_TEST(allreduce_every_type_and_op_matches_the_host_reference)
{
	uint32_t n = (uint32_t)_i + 1;

	ck_assert_int_eq(run_matrix(dev, str, n, team[n], counts, sizeof(counts) / sizeof(counts[0]), "one process"), 0);
}
END_TEST

/* ---------------------------------------------------------------- a static ring */

/* GICE_TOPO=FILE: the ring runs in the file's order (here the devices reversed, which gice_coll_init
 * logs at debug level), and every allreduce still matches the host reference. */
START_TEST(a_ring_file_orders_the_ring)
{
	char path[] = "/tmp/gice-test-ring-XXXXXX", text[64], log[4096], want[160];
	int fd = mkstemp(path), len = 0;
	gice_team_t *t;
	struct test_log l;

	ck_assert_int_ge(fd, 0);
	len += snprintf(text + len, sizeof(text) - (size_t)len, "# reversed\n");
	for (int i = NDEV - 1; i >= 0; i--)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "%u%s", gice_device_id(dev[i]), i ? "," : "\n");
	ck_assert_int_eq(write(fd, text, (size_t)len), len);
	close(fd);
	ck_assert_int_eq(gice_team_split_strided(team[NDEV], 0, 1, NDEV, &t), GICE_OK);
	setenv("GICE_TOPO", path, 1);
	test_log_begin(&l);
	int rc = gice_coll_init(t);
	test_log_end(&l, log, sizeof(log));
	unsetenv("GICE_TOPO");
	unlink(path);
	ck_assert_int_eq(rc, GICE_OK);
	snprintf(want, sizeof(want), "ring order (GICE_TOPO=%s): 3 2 1 0", path);
	ck_assert_msg(strstr(log, want), "log lacks '%s':\n%s", want, log);
	ck_assert_int_eq(run_matrix(dev, str, NDEV, t, counts, sizeof(counts) / sizeof(counts[0]), "ring file"), 0);
	ck_assert_int_eq(gice_team_destroy(t), GICE_OK);
}
END_TEST

static void setup_ring_debug(void)
{
	setenv("GICE_LOG_LEVEL", "debug", 1); /* the ring order is logged at debug level */
	setenv("GICE_LOG_SUBSYS", "api", 1);
	setup_ring();
}

/* ---------------------------------------------------------------- from a kernel, repeated */

#define REPEAT 1000

struct rep_args {
	gice_team_t *team;
	uint64_t a, b;
};

/* Alternate a one-shot-sized and a ring-sized int64 sum, REPEAT times, in place on a (small)
 * and out of place a -> b (large). Device r holds v + r (v the same everywhere), so the sum is
 * NDEV v + 0 + 1 + .. + NDEV-1; from it each iteration sets v to v + 1: any wrong sum shows in
 * the final v. */
static void repeat_kernel(gice_kctx_t *k, void *p)
{
	struct rep_args *a = p;
	int64_t r = gice_team_rank(a->team, k->dev), base = NDEV * (NDEV - 1) / 2;
	int64_t *x = gice_sym_ptr(k->dev, a->a);

	for (int it = 0; it < REPEAT; it++) {
		size_t count = it % 2 ? 1500 : 3;
		uint64_t recv = it % 2 ? a->b : a->a;
		const int64_t *sum = gice_sym_ptr(k->dev, recv);
		if (gice_coll_allreduce_k(k, a->team, a->a, recv, count, GICE_INT64, GICE_RED_SUM))
			return;
		for (size_t j = 0; j < count; j++)
			x[j] = (sum[j] - base) / NDEV + 1 + r;
	}
}

START_TEST(allreduce_from_a_kernel_a_thousand_times)
{
	struct rep_args a = {.team = team[NDEV], .a = A, .b = B};

	for (int i = 0; i < NDEV; i++) {
		int64_t *x = gice_sym_ptr(dev[i], A);
		for (size_t j = 0; j < 1500; j++)
			x[j] = (int64_t)j * 1000 + i;
	}
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_launch(str[i], repeat_kernel, 1, &a, sizeof(a)), GICE_OK);
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_sync(str[i], 0), GICE_OK);
	/* element j < 3 went through every iteration, j >= 3 through every other one */
	for (int i = 0; i < NDEV; i++) {
		const int64_t *x = gice_sym_ptr(dev[i], A);
		for (size_t j = 0; j < 1500; j++) {
			int64_t want = (int64_t)j * 1000 + (j < 3 ? REPEAT : REPEAT / 2) + i;
			ck_assert_msg(x[j] == want, "device %d element %zu: %lld, expected %lld", i, j, (long long)x[j],
				      (long long)want);
		}
	}
}
END_TEST

/* ---------------------------------------------------------------- errors */

/* call returns status and logs message */
#define EXPECT_FAIL(call, status, message)                                                             \
	do {                                                                                           \
		char text_[1024];                                                                      \
		struct test_log log_;                                                                  \
		test_log_begin(&log_);                                                                 \
		int rc_ = (call);                                                                      \
		test_log_end(&log_, text_, sizeof(text_));                                             \
		ck_assert_msg(rc_ == (status), "%s returned %d, expected %d", #call, rc_, (status));   \
		ck_assert_msg(strstr(text_, message), "%s logged '%s', expected '%s'", #call, text_, message); \
	} while (0)

struct bad_k_args {
	gice_team_t *team;
	uint64_t a, b;
	int rc;
};

/* The kernel form with a root past the team: returns the error and fails the kernel. */
static void bad_root_kernel(gice_kctx_t *k, void *p)
{
	struct bad_k_args *a = p;

	a->rc = gice_coll_reduce_k(k, a->team, a->a, a->b, 1, GICE_INT32, GICE_RED_SUM, 9);
}

static int launch_sync(gice_stream_t *s, gice_kernel_t kernel, void *args, size_t size)
{
	int rc = gice_launch(s, kernel, 1, args, size);

	return rc ? rc : gice_stream_sync(s, 0);
}

START_TEST(bad_calls_fail_exactly)
{
	gice_team_t *t2;
	uint64_t heap = gice_sym_heap_bytes();

	ck_assert_int_eq(gice_team_split_strided(team[NDEV], 1, 1, 2, &t2), GICE_OK); /* no gice_coll_init */
	EXPECT_FAIL(gice_coll_allreduce(str[1], t2, A, B, 1, GICE_INT32, GICE_RED_SUM), GICE_ERR_INVALID,
		    "gice_coll_allreduce: no gice_coll_init on this team");
	EXPECT_FAIL(gice_coll_init(team[NDEV]), GICE_ERR_INVALID,
		    "gice_coll_init: the team of 4 already has its collectives");
	setenv("GICE_TOPO", "diagonal", 1); /* refused before any collective step */
	EXPECT_FAIL(gice_coll_init(t2), GICE_ERR_CONFIG, "GICE_TOPO=diagonal: not auto, rank or a file path (with a '/')");
	setenv("GICE_TOPO", "/nonexistent/ring", 1);
	EXPECT_FAIL(gice_coll_init(t2), GICE_ERR_CONFIG, "GICE_TOPO=/nonexistent/ring: cannot read the ring file");
	char bad[] = "/tmp/gice-test-topo-XXXXXX";
	int fd = mkstemp(bad);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "0 1 x\n", 6), 6);
	close(fd);
	setenv("GICE_TOPO", bad, 1);
	char want[128];
	snprintf(want, sizeof(want), "GICE_TOPO=%s: \"x\" is not a global device id", bad);
	EXPECT_FAIL(gice_coll_init(t2), GICE_ERR_CONFIG, want);
	fd = open(bad, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "1, 0 # twice\n1\n", 16), 16);
	close(fd);
	snprintf(want, sizeof(want), "GICE_TOPO=%s: device 1 is listed twice", bad);
	EXPECT_FAIL(gice_coll_init(t2), GICE_ERR_CONFIG, want);
	unlink(bad);
	unsetenv("GICE_TOPO");
	EXPECT_FAIL(gice_coll_allreduce(str[1], t2, A, B, 1, GICE_INT32, GICE_RED_SUM), GICE_ERR_INVALID,
		    "gice_coll_allreduce: no gice_coll_init on this team");
	EXPECT_FAIL(gice_coll_allreduce(str[0], team[NDEV], A, B, 1, GICE_INT32, GICE_RED_AVG), GICE_ERR_INVALID,
		    "gice_coll_allreduce: avg is for floating types, not int32");
	EXPECT_FAIL(gice_coll_allreduce(str[0], team[NDEV], A, B, 1, GICE_DTYPE_COUNT, GICE_RED_SUM), GICE_ERR_INVALID,
		    "gice_coll_allreduce: bad type 10 or op 0");
	EXPECT_FAIL(gice_coll_allreduce(str[3], team[2], A, B, 1, GICE_INT32, GICE_RED_SUM), GICE_ERR_INVALID,
		    "gice_coll_allreduce: device 3 is not in the team");
	EXPECT_FAIL(gice_coll_allreduce(str[0], team[NDEV], A, heap - 4, 2, GICE_INT32, GICE_RED_SUM),
		    GICE_ERR_OUT_OF_BOUNDS, "gice_coll_allreduce: 2 int32 at offsets");
	EXPECT_FAIL(gice_coll_broadcast(str[0], team[NDEV], A, B, 1, GICE_INT32, 4), GICE_ERR_INVALID,
		    "gice_coll_broadcast: root 4 out of range (team of 4)");
	EXPECT_FAIL(gice_coll_alltoall(str[0], team[NDEV], A, A, 1, GICE_INT32), GICE_ERR_INVALID,
		    "gice_coll_alltoall: in place is not supported (send == recv)");
	/* a block of send past the heap; a landing place past it (where a peer's block would go) */
	size_t cnt[NDEV] = {1, 1, 1, 1}, dsp[NDEV] = {0, 1, 2, heap}, far[NDEV] = {0, 1, 2, heap + 1},
	       near[NDEV] = {0, 1, 2, 3};
	EXPECT_FAIL(gice_coll_alltoallv(str[0], team[NDEV], A, cnt, dsp, B, near, GICE_INT8), GICE_ERR_OUT_OF_BOUNDS,
		    "gice_coll_alltoallv: block 3 (1 int8 at 4194304, lands at 3): outside the 4194304-byte symmetric heap");
	EXPECT_FAIL(gice_coll_alltoallv(str[0], team[NDEV], A, cnt, near, B, far, GICE_INT8), GICE_ERR_OUT_OF_BOUNDS,
		    "gice_coll_alltoallv: block 3 (1 int8 at 3, lands at 4194305)");
	EXPECT_FAIL(gice_coll_alltoallv(str[0], team[NDEV], A, NULL, near, B, near, GICE_INT8), GICE_ERR_INVALID,
		    "gice_coll_alltoallv: NULL counts or displacements");
	/* from a kernel: the same checks, and the kernel fails (its stream's next sync says so) */
	struct bad_k_args a = {.team = team[NDEV], .a = A, .b = B};
	EXPECT_FAIL(launch_sync(str[0], bad_root_kernel, &a, sizeof(a)), GICE_ERR_INVALID,
		    "gice_coll_reduce: root 9 out of range (team of 4)");
	ck_assert_int_eq(gice_team_destroy(t2), GICE_OK);
}
END_TEST

START_TEST(coll_init_before_the_heap_fails)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	EXPECT_FAIL(gice_coll_init(NULL), GICE_ERR_INVALID, "gice_coll_init: no symmetric heap (gice_sym_init first)");
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}
END_TEST

/* ---------------------------------------------------------------- persistent, host idle */

#define PERSIST 1000

struct drive_args {
	gice_team_t *team;
	uint64_t a, b;
	gice_counter_t trigger, done;
};

/* Per iteration: new values into send (i + rank, i * 7 + j), one trigger write, then wait for
 * the persistent allreduce's done and check every element of recv. */
static void drive_kernel(gice_kctx_t *k, void *p)
{
	struct drive_args *a = p;
	int64_t r = gice_team_rank(a->team, k->dev), *x = gice_sym_ptr(k->dev, a->a);
	const int64_t *y = gice_sym_ptr(k->dev, a->b);

	for (int64_t i = 1; i <= PERSIST; i++) {
		for (size_t j = 0; j < 300; j++)
			x[j] = i * 7 + (int64_t)j + r;
		gice_trigger_add(k, a->trigger, 1);
		if (gice_wait_until(k, a->done, GICE_CMP_GE, (uint64_t)i, 0, NULL))
			return;
		for (size_t j = 0; j < 300; j++)
			if (y[j] != NDEV * (i * 7 + (int64_t)j) + NDEV * (NDEV - 1) / 2) {
				gice_kernel_fail(k, GICE_ERR_INVALID, "persistent allreduce: wrong sum");
				return;
			}
	}
}

START_TEST(persistent_allreduce_fired_by_one_trigger_write_a_thousand_times)
{
	struct drive_args a = {.team = team[NDEV], .a = A, .b = B};
	gice_stream_t *s2[NDEV];

	ck_assert_int_eq(gice_sym_counter_alloc(&a.trigger), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&a.done), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_stream_create(dev[i], &s2[i]), GICE_OK);
		ck_assert_int_eq(gice_coll_allreduce_persistent(str[i], team[NDEV], A, B, 300, GICE_INT64, GICE_RED_SUM,
								 a.trigger, 1, PERSIST, a.done),
				 GICE_OK);
		ck_assert_int_eq(gice_launch(s2[i], drive_kernel, 1, &a, sizeof(a)), GICE_OK);
	}
	for (int i = 0; i < NDEV; i++) { /* the host only waits */
		ck_assert_int_eq(gice_stream_sync(s2[i], 0), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(str[i], 0), GICE_OK);
		ck_assert_uint_eq(gice_counter_read(dev[i], a.done), PERSIST);
		ck_assert_int_eq(gice_stream_destroy(s2[i]), GICE_OK);
	}
	EXPECT_FAIL(gice_coll_allreduce_persistent(str[0], team[NDEV], A, B, 1, GICE_INT64, GICE_RED_SUM,
						   GICE_NO_COUNTER, 1, 1, a.done),
		    GICE_ERR_INVALID, "gice_coll_allreduce_persistent: trigger 4294967295");
}
END_TEST

/* ---------------------------------------------------------------- across processes */

static const size_t job_counts[] = {0, 1, 61, 1021, MAXC};

/* A rank of a job, one device: the world team with GICE_ALGO=ring and a copy of it (split, all
 * ranks) with oneshot; every type and op on both. */
static int job_rank(int rank, int size)
{
	gice_device_t *d;
	gice_stream_t *s;
	gice_team_t *world, *copy;

	setenv("GICE_CHUNK_BYTES", "256", 1);
	setenv("GICE_COLL_SCRATCH_BYTES", "64k", 1);
	FAILIF(gice_init(), "gice_init");
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
	FAILIF(gice_device_open(&a, &d) || gice_stream_create(d, &s), "device");
	FAILIF(gice_sym_init(HEAP), "gice_sym_init");
	world = gice_team_world();
	FAILIF(gice_team_split_strided(world, 0, 1, (uint32_t)size, &copy), "split");
	setenv("GICE_ALGO", "ring", 1);
	FAILIF(gice_coll_init(world), "gice_coll_init ring");
	setenv("GICE_ALGO", "oneshot", 1);
	FAILIF(gice_coll_init(copy), "gice_coll_init oneshot");
	FAILIF(gice_sym_alloc(BUF, &A) || gice_sym_alloc(BUF, &B), "alloc");
	int rc = run_matrix(&d, &s, 1, world, job_counts, sizeof(job_counts) / sizeof(job_counts[0]), "ring");
	FAILIF(rc, "ring matrix: %d", rc);
	rc = run_matrix(&d, &s, 1, copy, job_counts, 3, "oneshot");
	FAILIF(rc, "oneshot matrix: %d", rc);
	rc = run_others(&d, &s, 1, world, job_counts, 4, "others");
	FAILIF(rc, "other collectives: %d", rc);
	FAILIF(gice_sym_fini(), "gice_sym_fini");
	gice_stream_destroy(s);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

/* Under injected faults (drop, duplicate, reorder, corrupt: the reliability layer repairs them),
 * over tcp with every byte through the fabric: the ring allreduce stays exact. */
static int job_faults(int rank, int size)
{
	static const size_t cnts[] = {1, 1021, MAXC};
	gice_device_t *d;
	gice_stream_t *s;

	setenv("GICE_CHUNK_BYTES", "4k", 1);
	setenv("GICE_COLL_SCRATCH_BYTES", "64k", 1);
	setenv("GICE_ALGO", "ring", 1);
	FAILIF(gice_init(), "gice_init");
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
	FAILIF(gice_device_open(&a, &d) || gice_stream_create(d, &s), "device");
	FAILIF(gice_sym_init(HEAP), "gice_sym_init");
	FAILIF(gice_coll_init(gice_team_world()), "gice_coll_init");
	FAILIF(gice_sym_alloc(BUF, &A) || gice_sym_alloc(BUF, &B), "alloc");
	for (int ty = 0; ty < GICE_DTYPE_COUNT; ty++)
		for (size_t ci = 0; ci < sizeof(cnts) / sizeof(cnts[0]); ci++) {
			gice_redop_t op = (gice_redop_t)((ty + (int)ci) % 4);
			fill(gice_sym_ptr(d, A), (gice_dtype_t)ty, op, (uint32_t)rank, cnts[ci]);
			FAILIF(gice_coll_allreduce(s, gice_team_world(), A, B, cnts[ci], (gice_dtype_t)ty, op), "enqueue");
			FAILIF(gice_stream_sync(s, 0), "allreduce");
			FAILIF(check(gice_sym_ptr(d, B), (gice_dtype_t)ty, op, (uint32_t)size, cnts[ci], "faults"), "result");
		}
	FAILIF(gice_sym_fini(), "gice_sym_fini");
	gice_stream_destroy(s);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(allreduce_under_faults)
{
	static const char *const env[] = {"GICE_PLANE=net", "GICE_FAULTS=drop=0.02,dup=0.01,reorder=0.02,corrupt=0.005,seed=7",
					  NULL};
	int st[3];

	run_job(3, 3, job_faults, "tcp", env, st, NULL);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d", r, st[r]);
}
END_TEST

START_TEST(allreduce_across_processes)
{
	static const int ranks[] = {2, 3, 4, 3, 5, 8};
	static const char *const net[] = {"GICE_PLANE=net", NULL};
	int st[8], n = ranks[_i];
	char log[] = "/tmp/gice-coll-XXXXXX";
	int fd = mkstemp(log);

	ck_assert_int_ge(fd, 0);
	close(fd);
	/* 0-2, 4, 5: shm with the NVLink plane; 3: tcp without it */
	run_job(n, n, job_rank, _i == 3 ? "tcp" : NULL, _i == 3 ? net : NULL, st, log);
	char text[4096];
	job_log_take(log, text, sizeof(text));
	for (int r = 0; r < n; r++)
		ck_assert_msg(st[r] == 0, "rank %d of %d exited %d; rank 0 said: %s", r, n, st[r], text);
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *suite(void)
{
	Suite *s = suite_create("coll");
	struct {
		const char *name;
		const TTest *test;
		int loops;
		void (*setup)(void);
	} cases[] = {
		{"allreduce_ring", allreduce_every_type_and_op_matches_the_host_reference, NDEV, setup_ring},
		{"allreduce_oneshot", allreduce_every_type_and_op_matches_the_host_reference, NDEV, setup_oneshot},
		{"other_collectives", other_collectives_match_the_host_reference, NDEV, setup_ring},
		{"allreduce_repeated_in_a_kernel", allreduce_from_a_kernel_a_thousand_times, 1, setup_auto},
		{"errors", bad_calls_fail_exactly, 1, setup_auto},
		{"ring_file", a_ring_file_orders_the_ring, 1, setup_ring_debug},
		{"persistent", persistent_allreduce_fired_by_one_trigger_write_a_thousand_times, 1, setup_auto},
		{"init_without_heap", coll_init_before_the_heap_fails, 1, NULL},
		{"multiproc", allreduce_across_processes, 6, NULL},
		{"faults", allreduce_under_faults, 1, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 120);
		if (cases[i].setup)
			tcase_add_checked_fixture(tc, cases[i].setup, teardown);
		tcase_add_loop_test(tc, cases[i].test, 0, cases[i].loops);
		suite_add_tcase(s, tc);
	}
	return s;
}

/* `test_coll job`: one rank of the cross-process job, started by a launcher (gicerun). */
int main(int argc, char **argv) { return test_main_or_job(argc, argv, job_rank, suite); }
