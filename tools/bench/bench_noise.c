/* bench_noise.c: gice-bench cpu-noise — iteration times of a training-step loop with the host's
 * CPU disturbed (seed 5.4), device mode against host mode.
 *
 * Here the emulated GPU's engines (SM, CT and stream threads) are CPU threads too: busy
 * processes would slow both modes alike, which is not the experiment. So the noise goes only
 * to what is the host on real hardware, on the sending side (side 0 of the pair, whose
 * iterations are timed): its launching thread (the one that enqueued the loop and waits) and,
 * in host mode, its device's host proxy thread (gice-d0-proxy) — never a device's SM, CT or
 * stream threads, nor the receiving device's proxy (which does the NIC's receive work). A noise thread picks one of
 * them every 0-2 ms (uniform) and preempts it for 20-400 us (uniform): a real-time signal whose
 * handler sleeps, so the thread is off its CPU as if another process had taken it, without the
 * noise itself taking CPU from the device's threads.
 *
 * Per gradient size (--sizes, default 1 MiB in 8 pieces; compute of about 100 us per
 * iteration), the loop of bench_step.c runs quiet, then noisy. Rows quiet and noisy (p50/p99 of
 * one iteration on the device), then
 *   # cpu-noise MODE B: p50 A -> B us, p99 C -> D us, max E -> F us (quiet -> noisy); N delays
 *     injected into: main (tid T), gice-d0-proxy (tid U)
 * naming every perturbed thread. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench/bench.h"

#define NOISE_PIECES 8u
#define NOISE_MAX_TARGETS 16

struct noise {
	pid_t tid[NOISE_MAX_TARGETS];
	char name[NOISE_MAX_TARGETS][32];
	int n;
	_Atomic int stop;
	_Atomic long delays;
	pthread_t thr;
};

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
	while (nanosleep(&ts, &ts))
		;
}

/* The preemption: the thread the signal hit sleeps for the delay the noise thread chose. */
static _Atomic uint64_t noise_delay_ns;
static void on_noise(int sig)
{
	(void)sig;
	sleep_ns(atomic_load(&noise_delay_ns));
}

/* The sending side's host threads: the caller (the launching thread) and, in host mode, the
 * host proxy of side 0's device (the first this process opened, index 0). Not side 1's proxy:
 * the emulator's proxy thread also does its device's receive work (GICE_MODE=host has one CT
 * thread, the proxy), which on real hardware is the NIC's, not the host's. */
static void find_targets(struct noise *nz)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	nz->tid[0] = (pid_t)syscall(SYS_gettid);
	snprintf(nz->name[0], sizeof(nz->name[0]), "main");
	nz->n = 1;
	while (d && (de = readdir(d)) && nz->n < NOISE_MAX_TARGETS) {
		char path[300], comm[32] = "";
		FILE *f;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = 0;
			if (!strcmp(comm, "gice-d0-proxy")) { /* side 0's device: opened first here */
				nz->tid[nz->n] = (pid_t)atoi(de->d_name);
				snprintf(nz->name[nz->n], sizeof(nz->name[0]), "%s", comm);
				nz->n++;
			}
		}
		fclose(f);
	}
	if (d)
		closedir(d);
}

static void *noise_thread(void *arg)
{
	struct noise *nz = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)nz->tid[0];

	while (!atomic_load(&nz->stop)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		sleep_ns(x % 2000000u);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		atomic_store(&noise_delay_ns, 20000u + x % 380000u);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (syscall(SYS_tgkill, getpid(), nz->tid[x % (uint64_t)nz->n], SIGRTMIN + 3) == 0)
			atomic_fetch_add(&nz->delays, 1);
	}
	return NULL;
}

static int noise_mode(const char *mode)
{
	long iters = opt.iters ? opt.iters : 200, warm = iters / 10 + 2, n = iters + warm;
	uint64_t *t = calloc((size_t)n, sizeof(*t));
	uint64_t work = (uint64_t)(100000.0 / NOISE_PIECES / bench_step_ns_per_work()) + 1;
	struct sigaction sa = {.sa_handler = on_noise, .sa_flags = SA_RESTART};
	int rc = 0;

	if (!t)
		die("cpu-noise: calloc", GICE_ERR_NO_MEMORY);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGRTMIN + 3, &sa, NULL);
	for (int si = 0; si < opt.nsizes && !rc; si++) {
		size_t bytes = opt.sizes[si] / NOISE_PIECES * NOISE_PIECES;
		struct bench_step st;
		struct noise nz;
		char transport[64], who[512] = "";
		double q[3] = {0}, z[3] = {0};

		bench_step_open(&st, bytes);
		int me = st.p.active && st.p.sd[0].local;
		snprintf(transport, sizeof(transport), "%s/%s", gice_device_provider(st.p.sd[st.p.role].d), mode);
		rc |= bench_step_run(&st, NOISE_PIECES, 1, work, n, t);
		if (me)
			q[0] = pct(t + warm, iters, 0.5), q[1] = pct(t + warm, iters, 0.99), q[2] = pct(t + warm, iters, 1);
		memset(&nz, 0, sizeof(nz));
		find_targets(&nz);
		if (me && pthread_create(&nz.thr, NULL, noise_thread, &nz)) /* side 1's rank: no noise */
			die("cpu-noise: pthread_create", GICE_ERR_NO_MEMORY);
		rc |= bench_step_run(&st, NOISE_PIECES, 1, work, n, t);
		atomic_store(&nz.stop, 1);
		if (me)
			pthread_join(nz.thr, NULL);
		if (me) {
			z[0] = pct(t + warm, iters, 0.5), z[1] = pct(t + warm, iters, 0.99), z[2] = pct(t + warm, iters, 1);
			for (int i = 0; i < nz.n; i++)
				snprintf(who + strlen(who), sizeof(who) - strlen(who), "%s%s (tid %d)", i ? ", " : "",
					 nz.name[i], (int)nz.tid[i]);
			int ranks = (int)st.p.world;
			row("quiet", transport, ranks, bytes, iters, q[0], q[1], (double)bytes / q[0], (double)bytes / q[0]);
			row("noisy", transport, ranks, bytes, iters, z[0], z[1], (double)bytes / z[0], (double)bytes / z[0]);
			fprintf(opt.csv ? stderr : stdout,
				"# cpu-noise %s %zu B: p50 %.1f -> %.1f us, p99 %.1f -> %.1f us, max %.1f -> %.1f us "
				"(quiet -> noisy); %ld delays of 20-400 us injected into: %s\n",
				mode, bytes, q[0], z[0], q[1], z[1], q[2], z[2], atomic_load(&nz.delays), who);
			fflush(stdout);
		}
		bench_step_close(&st);
	}
	signal(SIGRTMIN + 3, SIG_IGN);
	free(t);
	return rc;
}

int bench_cpu_noise(void)
{
	if (!opt.nsizes_set)
		opt.sizes[0] = 1u << 20, opt.nsizes = 1;
	return bench_modes(noise_mode);
}
