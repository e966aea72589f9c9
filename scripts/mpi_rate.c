/* mpi_rate.c: the MPI peer of `gice-bench rate`, in the manner of osu_mbw_mr. Ranks are paired
 * 0<->1, 2<->3, ...; the first of a pair sends. Per window the sender posts W MPI_Isends of S
 * bytes, each from its own slot, and waits for them (MPI_Waitall) and for an 8-byte
 * acknowledgement; the receiver posts W MPI_Irecvs into W slots, waits for them and sends the
 * acknowledgement. Messages/s = timed messages / time from the first timed window to the last
 * acknowledgement. Message counts, warm-up and the output follow gice-bench rate: per size, the
 * row bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps (iters: timed messages;
 * p50/p99: time per message of a window) and a line '# rate S B window W: N msgs/s'. At the end
 * the receiver checks every byte of its slots (exit 1 on a mismatch).
 *
 *   mpirun -np 2 mpi_rate [-s 8,4096] [-w 64] [-i MESSAGES] [-t LABEL]
 *
 * Built by scripts/bench-rate-vs-ompi.sh with mpicc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_DATA 100
#define TAG_ACK  101
#define ACK_BYTES 8

static long default_iters(size_t bytes) /* as gice-bench */
{
	return bytes <= 64 ? 20000 : bytes <= 4096 ? 10000 : bytes <= 65536 ? 2000 : 200;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, long n, double p) /* ns samples -> us */
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return (double)v[(long)(p * (double)(n - 1) + 0.5)] / 1000.0;
}

static uint8_t content(int si, long j, size_t i) { return (uint8_t)((uint64_t)(si + 1) * 131u + (uint64_t)j * 7u + i); }

int main(int argc, char **argv)
{
	const char *sizes = "8,4096", *label = "ompi";
	long iters = 0, W = 64;
	int rank, world, ch, rc = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	while ((ch = getopt(argc, argv, "s:w:i:t:")) != -1) {
		switch (ch) {
		case 's': sizes = optarg; break;
		case 'w': W = atol(optarg); break;
		case 'i': iters = atol(optarg); break;
		case 't': label = optarg; break;
		default:
			if (!rank)
				fprintf(stderr, "usage: mpi_rate [-s 8,4096] [-w 64] [-i MESSAGES] [-t LABEL]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (W < 1 || iters < 0 || world < 2) {
		if (!rank)
			fprintf(stderr, "mpi_rate: need -w >= 1, -i >= 0 and at least 2 ranks (%d)\n", world);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int sender = !(rank & 1), partner = rank ^ 1, active = partner < world, pairs = world / 2;
	if (!rank)
		printf("bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps\n");

	char buf[256];
	int si = 0;
	snprintf(buf, sizeof(buf), "%s", sizes);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), si++) {
		size_t bytes = strtoul(t, NULL, 0);
		long windows = ((iters ? iters : default_iters(bytes)) + W - 1) / W, warm = windows / 10 + 1;
		uint8_t *slots = malloc((size_t)W * bytes + 1), ack[ACK_BYTES] = {0};
		MPI_Request *req = malloc((size_t)W * sizeof(*req));
		uint64_t *win_ns = calloc((size_t)windows, sizeof(*win_ns));
		double t_start = 0, t_end = 0;

		if (!slots || !req || !win_ns) {
			fprintf(stderr, "mpi_rate: no memory for %ld x %zu bytes\n", W, bytes);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (long j = 0; j < W; j++)
			for (size_t i = 0; i < bytes; i++)
				slots[(size_t)j * bytes + i] = sender ? content(si, j, i) : 0;
		MPI_Barrier(MPI_COMM_WORLD);
		for (long w = 0; active && w < warm + windows; w++) {
			double t0 = MPI_Wtime();
			if (w == warm)
				t_start = t0;
			for (long j = 0; j < W; j++) {
				uint8_t *p = slots + (size_t)j * bytes;
				if (sender)
					MPI_Isend(p, (int)bytes, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &req[j]);
				else
					MPI_Irecv(p, (int)bytes, MPI_BYTE, partner, TAG_DATA, MPI_COMM_WORLD, &req[j]);
			}
			MPI_Waitall((int)W, req, MPI_STATUSES_IGNORE);
			if (sender)
				MPI_Recv(ack, ACK_BYTES, MPI_BYTE, partner, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			else
				MPI_Send(ack, ACK_BYTES, MPI_BYTE, partner, TAG_ACK, MPI_COMM_WORLD);
			if (w >= warm)
				win_ns[w - warm] = (uint64_t)((MPI_Wtime() - t0) * 1e9);
		}
		t_end = MPI_Wtime();
		int bad = 0, any_bad = 0;
		for (long j = 0; active && !sender && !bad && j < W; j++)
			for (size_t i = 0; i < bytes; i++)
				if (slots[(size_t)j * bytes + i] != content(si, j, i)) {
					fprintf(stderr, "mpi_rate: rank %d: FAILED: %zu B: slot %ld: first bad byte at offset %zu\n",
						rank, bytes, j, i);
					bad = 1;
					break;
				}
		MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (any_bad)
			rc = 1;
		else if (active && sender) {
			double us = (t_end - t_start) * 1e6, msgs = (double)(windows * W);
			for (long w = 0; w < windows; w++)
				win_ns[w] /= (uint64_t)W;
			double p50 = pct(win_ns, windows, 0.5), p99 = pct(win_ns, windows, 0.99);
			double mbps = (double)bytes * msgs / us;
			printf("rate,%s,%d,%zu,%ld,%.3f,%.3f,%.1f,%.1f\n", label, world, bytes, windows * W, p50, p99, mbps,
			       mbps * pairs);
			printf("# rate %zu B window %ld: %.0f msgs/s\n", bytes, W, msgs / us * 1e6);
			fflush(stdout);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		free(slots);
		free(req);
		free(win_ns);
	}
	MPI_Finalize();
	return rc;
}
