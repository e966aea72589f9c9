/* gice-bench: microbenchmarks of the emulated hardware. This file parses the command line and
 * prints the rows; each family of benchmarks has its own file:
 *   bench_local.c   trigger  a kernel writes a trigger word; the CT watching it fires an armed
 *                            counter-add; the latency is from the trigger write to the CT's write
 *                            of that counter (its timestamp).
 *                   launch   gice_launch of an empty kernel + gice_stream_sync, per grid size
 *                            (--blocks).
 *                   idle     CPU used by an idle device over one second, after 10 ms of idleness.
 *                   memcpy   one core's memcpy bandwidth per size: the reference for copy-engine
 *                            puts.
 *   bench_put.c     put      put_signal ping-pong between two devices through libfabric (every
 *                            device talks through its endpoint): one-way latency = half the
 *                            round trip, MB/s = bytes / one-way time (the fi_pingpong
 *                            convention, so the two compare directly).
 *   bench_get.c     get      gets of the other device's memory against puts of the same size,
 *                            each to its completion (--window at a time), in alternating rounds;
 *                            the target runs no kernel: p50 and p99 of each, and their ratio.
 *   bench_rate.c    rate     windows of put_signals one way between two devices, an ack per
 *                            window (osu_mbw_mr): messages/s and MB/s per size.
 *   bench_file.c    file-read, file-write  the storage path: a file into / out of device memory
 *                            beside plain 1 MiB reads / writes of the same file (dd bs=1M).
 *   bench_stress.c  stress   a checked workload for reliability testing: windows of puts of
 *   (stress_kernels.c)       pseudo-random sizes from device A into a ring at device B, then a
 *                            large exchange both ways at once; every byte and every signal count
 *                            verified, one "intact" line per device with the reliability and
 *                            fault counters (docs/gice-bench.md).
 *   bench_coll.c    allreduce, allgather, reduce_scatter, broadcast, alltoall  the collectives
 *                            on the world team in a kernel, per size: p50, p99, algbw (MBps) and
 *                            busbw (busbw_MBps) as nccl-tests define them.
 *   bench_soak.c    soak     1,000,000 (--iters) triggered put_signals; every rank's RSS sampled
 *                            50 times must end within 5% of where it started.
 *   bench_overlap.c overlap  a training-step loop (compute, then a chunked exchange; bench_step.c)
 *                            against its compute alone: overlap efficiency, device vs host mode.
 *   bench_noise.c   cpu-noise  the same loop's iteration times with random delays injected into
 *                            the host's threads (launching thread, host proxy), device vs host.
 *   bench_first.c   first-kernel  counter written -> dependent kernel running: stream wait vs
 *                            a kernel that polls.
 * --csv prints bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

struct bench_opt opt = {.iters = 0, .bytes = 64u << 20, .chunk = 1u << 20, .window = 64, .seed = 1, .timeout_ms = 60000};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

double pct(uint64_t *v, long n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	long i = (long)(p * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

void die(const char *what, int rc)
{
	fprintf(stderr, "gice-bench: %s: %s (%s)\n", what, gice_status_name(rc), gice_status_str(rc));
	exit(1);
}

void bench_pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(seed + i);
}

long bench_default_iters(size_t bytes)
{
	if (opt.iters)
		return opt.iters;
	return bytes <= 64 ? 20000 : bytes <= 4096 ? 10000 : bytes <= 65536 ? 2000 : 200;
}

void header(void)
{
	if (opt.csv)
		printf("bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps\n");
	else
		printf("%-8s %-14s %5s %9s %7s %9s %9s %10s %10s\n", "bench", "transport", "ranks", "bytes", "iters",
		       "p50_us", "p99_us", "MBps", "busbw_MBps");
}

void row(const char *bench, const char *transport, int ranks, size_t bytes, long iters, double p50, double p99,
	 double mbps, double busbw)
{
	if (opt.csv)
		printf("%s,%s,%d,%zu,%ld,%.3f,%.3f,%.1f,%.1f\n", bench, transport, ranks, bytes, iters, p50, p99, mbps,
		       busbw);
	else
		printf("%-8s %-14s %5d %9zu %7ld %9.3f %9.3f %10.1f %10.1f\n", bench, transport, ranks, bytes, iters, p50,
		       p99, mbps, busbw);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gice-bench trigger|put|idle|memcpy [--csv] [--sizes 8,4096,...] [--iters N] [--provider NAME] "
		   "[--check] [--stages]\n"
		   "       gice-bench get [--csv] [--sizes 8,4096,...] [--window N] [--iters N] [--provider NAME] [--check]\n"
		   "       gice-bench launch [--csv] [--iters N] [--blocks 1,4,...] [--provider NAME]\n"
		   "       gice-bench rate [--csv] [--sizes 8,4096,...] [--window N] [--iters N] [--provider NAME]\n"
		   "       gice-bench stress [--csv] [--iters N] [--bytes B] [--chunk B] [--window N] [--seed S] "
		   "[--timeout-ms MS] [--provider NAME]\n"
		   "       gice-bench file-read|file-write --file PATH [--sizes 1m,256m,...] [--iters N] [--csv]\n"
		   "       gice-bench soak [--iters N] [--provider NAME]\n"
		   "       gice-bench barrier [--csv] [--iters N] [--provider NAME]\n"
		   "       gice-bench allreduce [--csv] [--sizes 8,...,64m] [--iters N] [--check] [--provider NAME]\n"
		   "       gice-bench allgather|reduce_scatter|broadcast|alltoall [--csv] [--sizes ...] [--iters N]\n"
		   "       gice-bench overlap|cpu-noise [--csv] [--sizes 1m,...] [--iters N<=400] [--provider NAME]\n"
		   "       gice-bench first-kernel [--csv] [--iters N] [--provider NAME]\n");
}

/* A number with an optional k, m or g suffix (binary), within [min, max]; 0 on success. */
static int parse_num(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (end != s && (*end == 'k' || *end == 'K'))
		v <<= 10, end++;
	else if (end != s && (*end == 'm' || *end == 'M'))
		v <<= 20, end++;
	else if (end != s && (*end == 'g' || *end == 'G'))
		v <<= 30, end++;
	if (errno || end == s || *end || *s == '-' || v < min || v > max) {
		fprintf(stderr, "gice-bench: bad %s '%s' (want %llu..%llu; k, m, g suffixes allowed)\n", name, s,
			(unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"csv", no_argument, 0, 'c'},      {"sizes", required_argument, 0, 's'},
					   {"iters", required_argument, 0, 'n'}, {"provider", required_argument, 0, 'p'},
					   {"check", no_argument, 0, 'k'},     {"help", no_argument, 0, 'h'},
					   {"stages", no_argument, 0, 'S'},    {"bytes", required_argument, 0, 'b'},
					   {"chunk", required_argument, 0, 'C'}, {"window", required_argument, 0, 'w'},
					   {"seed", required_argument, 0, 'e'}, {"timeout-ms", required_argument, 0, 't'},
					   {"blocks", required_argument, 0, 'B'}, {"file", required_argument, 0, 'F'},
					   {0, 0, 0, 0}};
	const char *sizes = NULL, *blocks = "1,4";
	uint64_t v;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "cs:n:p:khS", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': opt.csv = 1; break;
		case 's': sizes = optarg; break;
		case 'n': opt.iters = atol(optarg), opt.iters_set = 1; break;
		case 'p': opt.provider = optarg; break;
		case 'k': opt.check = 1; break;
		case 'S': opt.stages = 1; break;
		case 'b':
			if (parse_num("--bytes", optarg, 0, (1ull << 40), &v))
				return 2;
			opt.bytes = (size_t)v;
			break;
		case 'C':
			if (parse_num("--chunk", optarg, 0, (4ull << 30) - 1, &v))
				return 2;
			opt.chunk = (size_t)v;
			break;
		case 'w':
			if (parse_num("--window", optarg, 1, 1024, &v))
				return 2;
			opt.window = (uint32_t)v;
			opt.window_set = 1;
			break;
		case 'e':
			if (parse_num("--seed", optarg, 0, UINT64_MAX, &v))
				return 2;
			opt.seed = v;
			break;
		case 't':
			if (parse_num("--timeout-ms", optarg, 1, 86400000, &v))
				return 2;
			opt.timeout_ms = v;
			break;
		case 'B': blocks = optarg; break;
		case 'F': opt.file = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (opt.iters < 0) {
		fprintf(stderr, "gice-bench: bad --iters %ld\n", opt.iters);
		return 2;
	}
	if ((!strcmp(argv[optind], "overlap") || !strcmp(argv[optind], "cpu-noise")) && opt.iters > 400) {
		fprintf(stderr, "gice-bench: %s: --iters %ld: at most 400 (every iteration is enqueued at once: "
				"GICE_SMT_STREAM_DEPTH)\n", argv[optind], opt.iters);
		return 2;
	}
	opt.nsizes_set = sizes != NULL;
	if (!sizes)
		sizes = strcmp(argv[optind], "rate") ? "8,4096,65536,1048576" : "8,4096";
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", sizes);
	for (char *save, *t = strtok_r(buf, ",", &save); t && opt.nsizes < 32; t = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long n = strtoull(t, &end, 0);
		if (*end == 'k' || *end == 'K')
			n <<= 10;
		else if (*end == 'm' || *end == 'M')
			n <<= 20;
		else if (*end == 'g' || *end == 'G')
			n <<= 30;
		opt.sizes[opt.nsizes++] = (size_t)n;
	}
	snprintf(buf, sizeof(buf), "%s", blocks);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (opt.nblocks == 32) {
			fprintf(stderr, "gice-bench: at most 32 --blocks\n");
			return 2;
		}
		if (parse_num("--blocks", t, 1, 1u << 20, &v))
			return 2;
		opt.blocks[opt.nblocks++] = (uint32_t)v;
	}
	CHECK(gice_init());
	int table = strcmp(argv[optind], "idle") && strcmp(argv[optind], "soak") &&
		    (strcmp(argv[optind], "stress") || opt.csv);
	if (table && gice_rank() == 0)
		header();
	if (!strcmp(argv[optind], "trigger"))
		rc = bench_trigger();
	else if (!strcmp(argv[optind], "put"))
		rc = bench_put();
	else if (!strcmp(argv[optind], "get"))
		rc = bench_get();
	else if (!strcmp(argv[optind], "idle"))
		rc = bench_idle();
	else if (!strcmp(argv[optind], "memcpy"))
		rc = bench_memcpy();
	else if (!strcmp(argv[optind], "stress"))
		rc = bench_stress();
	else if (!strcmp(argv[optind], "launch"))
		rc = bench_launch();
	else if (!strcmp(argv[optind], "rate"))
		rc = bench_rate();
	else if (!strcmp(argv[optind], "file-read"))
		rc = bench_file_read();
	else if (!strcmp(argv[optind], "file-write"))
		rc = bench_file_write();
	else if (!strcmp(argv[optind], "soak"))
		rc = bench_soak();
	else if (!strcmp(argv[optind], "barrier"))
		rc = bench_barrier();
	else if (!strcmp(argv[optind], "allreduce"))
		rc = bench_allreduce();
	else if (!strcmp(argv[optind], "allgather"))
		rc = bench_allgather();
	else if (!strcmp(argv[optind], "reduce_scatter"))
		rc = bench_reduce_scatter();
	else if (!strcmp(argv[optind], "broadcast"))
		rc = bench_broadcast();
	else if (!strcmp(argv[optind], "alltoall"))
		rc = bench_alltoall();
	else if (!strcmp(argv[optind], "overlap"))
		rc = bench_overlap();
	else if (!strcmp(argv[optind], "cpu-noise"))
		rc = bench_cpu_noise();
	else if (!strcmp(argv[optind], "first-kernel"))
		rc = bench_first_kernel();
	else {
		usage(stderr);
		rc = 2;
	}
	gice_finalize();
	return rc;
}
