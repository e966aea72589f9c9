/* mpi_allreduce.c: the MPI peer of `gice-bench allreduce`. Per size, every rank times iters
 * calls of MPI_Allreduce (float sums, out of place, MPI_COMM_WORLD) after iters / 4 + 2 untimed
 * ones (as gice-bench), with
 * no barrier between calls, as the gice kernel does; rank 0 prints p50 and p99 of one of its
 * calls and algbw = bytes / p50 (MBps), busbw = algbw * 2 (n - 1) / n (busbw_MBps), in the row
 * format of gice-bench. Iterations as gice-bench allreduce. Before timing, one call of known
 * values is checked on every rank (exit 1 on a mismatch).
 *
 *   mpirun -np N mpi_allreduce [-s 8,4096,...] [-i ITERS] [-t LABEL]
 *
 * Built by scripts/compare-mpi.sh with mpicc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long default_iters(size_t bytes) /* as gice-bench allreduce */
{
	return bytes <= 4096 ? 2000 : bytes <= 65536 ? 500 : bytes <= (1u << 20) ? 100 : bytes <= (16u << 20) ? 20 : 10;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *sizes = "8,64,512,4096,32768,262144,2097152,16777216,67108864", *label = "ompi";
	long iters_opt = 0;
	int rank, n, ch, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	while ((ch = getopt(argc, argv, "s:i:t:")) != -1) {
		if (ch == 's')
			sizes = optarg;
		else if (ch == 'i')
			iters_opt = atol(optarg);
		else if (ch == 't')
			label = optarg;
	}
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", sizes);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t bytes = (size_t)strtoull(t, NULL, 0) / 4 * 4, count = bytes / 4;
		long iters = iters_opt ? iters_opt : default_iters(bytes);
		float *a = malloc(bytes + 4), *b = malloc(bytes + 4);
		uint64_t *tv = calloc((size_t)iters, sizeof(uint64_t));
		if (!a || !b || !tv)
			MPI_Abort(MPI_COMM_WORLD, 1);
		for (size_t j = 0; j < count; j++)
			a[j] = (float)((rank + 1) * (int)(j % 7));
		MPI_Allreduce(a, b, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		for (size_t j = 0; j < count && !bad; j++)
			if (b[j] != (float)((j % 7) * (size_t)n * (size_t)(n + 1) / 2)) {
				fprintf(stderr, "mpi_allreduce: rank %d %zu bytes element %zu: %g: FAILED\n", rank, bytes, j,
					(double)b[j]);
				bad = 1;
			}
		for (size_t j = 0; j < count; j++)
			a[j] = 1.0f;
		for (long i = -(iters / 4 + 2); i < iters; i++) {
			uint64_t t0 = now_ns();
			MPI_Allreduce(a, b, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			if (i >= 0)
				tv[i] = now_ns() - t0;
		}
		if (rank == 0) {
			qsort(tv, (size_t)iters, sizeof(*tv), cmp_u64);
			double p50 = (double)tv[(long)(0.5 * (double)(iters - 1) + 0.5)] / 1000.0;
			double p99 = (double)tv[(long)(0.99 * (double)(iters - 1) + 0.5)] / 1000.0;
			double algbw = p50 > 0 ? (double)bytes / p50 : 0;
			printf("allreduce,%s,%d,%zu,%ld,%.3f,%.3f,%.1f,%.1f\n", label, n, bytes, iters, p50, p99, algbw,
			       algbw * 2.0 * (n - 1) / n);
			fflush(stdout);
		}
		free(a);
		free(b);
		free(tv);
	}
	MPI_Finalize();
	return bad;
}
