/* gice-demo: what `make run` shows — a training-step-like loop on a ring of emulated GPUs, set
 * up once by the host and then driven only by streams, triggers and CTs.
 *
 * Every device runs, per step: a compute kernel (checks the 1 MiB block that arrived from its
 * left neighbour in the previous step, computes the next block), then its stream writes two
 * triggers: one fires an armed strong put_signal of the new block to the right neighbour, the other an
 * armed zero-byte put_signal telling the left neighbour its block was consumed. The next step's
 * kernel is bound to the arrival (stream wait on the signal), the consumption credit and the
 * send completion. The host enqueues all steps, then only waits: its CPU time per message is
 * printed. One rank: 4 devices in this process. Under gicerun -n N: one device per rank.
 *
 * --checkpoint DIR: every device also checkpoints each step's block to DIR/gice-ckpt-GID.bin by
 * trigger (its stream writes a trigger that fires an armed file write of the block), and once
 * the write has completed a second trigger fires an armed file read of it into another buffer,
 * whose completion releases a kernel that checks it: each step's checkpoint is reloaded and
 * verified on the device, with no host code per step. The file holds the last two steps (one
 * slot per outgoing buffer, as the descriptors are fixed data). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gice.h"

#define STEPS 50
#define BYTES (1u << 20)

#define TRY(call)                                                                                 \
	do {                                                                                      \
		int rc_ = (call);                                                                 \
		if (rc_) {                                                                        \
			fprintf(stderr, "gice-demo: %s: %s\n", #call, gice_status_str(rc_));      \
			exit(1);                                                                  \
		}                                                                                 \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t block_byte(uint64_t step, uint32_t gid, size_t i) { return (uint8_t)(step * 31 + gid * 7 + i); }

/* Per device; published to the other ranks. Buffer: [0,2M) two outgoing slots, [2M,4M) two
 * incoming slots (step s uses slot s % 2). */
struct dev_pub {
	uint32_t gid;
	gice_counter_t sig;    /* blocks arrived from the left */
	gice_counter_t credit; /* blocks the right has consumed */
	uint32_t pad;
	uint64_t key;
};

struct dev {
	gice_device_t *d;
	gice_stream_t *s;
	uint8_t *buf;
	struct dev_pub me;
	gice_trigger_t send, consumed; /* send: one count per step; its two descriptors alternate */
	gice_completion_t sent[2]; /* per outgoing slot: completions may come in any order */
	gice_completion_t credits_sent;
	uint64_t *errors; /* device memory */
	double *sink;
	/* --checkpoint */
	gice_file_t file;
	gice_trigger_t ck, rl;         /* fire the write / the reload of the step's slot */
	gice_completion_t ckdone, rldone;
	uint8_t *back;                 /* the reloaded block */
	uint64_t *ckerrors;            /* device memory: reloaded bytes that differ */
};

struct ckargs {
	const uint8_t *back;
	uint32_t gid;
	uint64_t step;
	uint64_t *errors;
};

/* The reloaded checkpoint of step `step` is that step's block. */
static void verify_kernel(gice_kctx_t *k, void *a_)
{
	struct ckargs *a = a_;
	size_t per = BYTES / gice_grid_dim(k), lo = per * gice_block_idx(k);
	uint64_t bad = 0;

	for (size_t i = lo; i < lo + per; i++)
		bad += a->back[i] != block_byte(a->step, a->gid, i);
	if (bad)
		__atomic_fetch_add(a->errors, bad, __ATOMIC_RELAXED);
}

struct kargs {
	uint8_t *buf;
	uint32_t gid, left_gid;
	uint64_t step;
	uint64_t *errors;
	double *sink;
};

/* One step's compute: check what arrived, do some arithmetic, write the next block. */
static void step_kernel(gice_kctx_t *k, void *a_)
{
	struct kargs *a = a_;
	size_t per = BYTES / gice_grid_dim(k), lo = per * gice_block_idx(k);
	const uint8_t *in = a->buf + 2 * BYTES + ((a->step - 1) % 2) * BYTES;
	uint8_t *out = a->buf + (a->step % 2) * BYTES;
	uint64_t bad = 0;
	double acc = 0;

	/* step 1 has nothing from the left: its landing slot is where the left's block 2 lands,
	 * which it sends without waiting for a credit, perhaps while this kernel runs */
	for (size_t i = lo; i < lo + per; i++) {
		uint8_t v = a->step > 1 ? in[i] : 0;
		if (a->step > 1 && v != block_byte(a->step - 1, a->left_gid, i))
			bad++;
		acc += sqrt((double)v + (double)i);
		out[i] = block_byte(a->step, a->gid, i);
	}
	if (bad)
		__atomic_fetch_add(a->errors, bad, __ATOMIC_RELAXED);
	a->sink[gice_block_idx(k)] = acc;
}

/* --checkpoint: the file, the counters and the armed descriptors of device x. */
static void checkpoint_setup(struct dev *x, const char *dir)
{
	char path[512];
	gice_desc_t desc;
	void *p;

	snprintf(path, sizeof(path), "%s/gice-ckpt-%u.bin", dir, x->me.gid);
	TRY(gice_file_open(x->d, path, GICE_FILE_READ | GICE_FILE_WRITE | GICE_FILE_CREATE | GICE_FILE_TRUNC,
			   &x->file));
	TRY(gice_mem_alloc(x->d, BYTES, &p));
	x->back = p;
	x->ckerrors = x->errors + 1;
	*x->ckerrors = 0;
	TRY(gice_counter_alloc(x->d, &x->ck));
	TRY(gice_counter_alloc(x->d, &x->rl));
	TRY(gice_counter_alloc(x->d, &x->ckdone));
	TRY(gice_counter_alloc(x->d, &x->rldone));
	for (int slot = 0; slot < 2; slot++) { /* step s uses slot s % 2: fires at 1, 3, 5... or 2, 4, 6... */
		gice_op_t w = {.type = GICE_OP_FILE_WRITE, .local = x->buf + slot * BYTES, .bytes = BYTES,
			       .rkey = x->file, .roff = (uint64_t)slot * BYTES, .signal = GICE_NO_COUNTER,
			       .completion = x->ckdone};
		gice_op_t r = {.type = GICE_OP_FILE_READ, .local = x->back, .bytes = BYTES, .rkey = x->file,
			       .roff = (uint64_t)slot * BYTES, .signal = GICE_NO_COUNTER, .completion = x->rldone};
		TRY(gice_arm(x->d, x->ck, slot ? 1 : 2, 2, &w, &desc));
		TRY(gice_arm(x->d, x->rl, slot ? 1 : 2, 2, &r, &desc));
	}
}

/* --checkpoint: step s's block to the file by trigger, back by trigger, checked by a kernel. */
static void checkpoint_step(struct dev *x, uint64_t s)
{
	struct ckargs a = {.back = x->back, .gid = x->me.gid, .step = s, .errors = x->ckerrors};

	TRY(gice_stream_write_value(x->s, x->ck, 1, 1));
	TRY(gice_stream_wait_value(x->s, x->ckdone, GICE_CMP_GE, s, 0));
	TRY(gice_stream_write_value(x->s, x->rl, 1, 1));
	TRY(gice_stream_wait_value(x->s, x->rldone, GICE_CMP_GE, s, 0));
	TRY(gice_launch(x->s, verify_kernel, 4, &a, sizeof(a)));
}

int main(int argc, char **argv)
{
	const char *ckpt_dir = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) {
			ckpt_dir = argv[++i];
		} else {
			fprintf(stderr, "usage: gice-demo [--checkpoint DIR]\n");
			return 2;
		}
	}
	TRY(gice_init());
	uint32_t world = gice_world_size(), rank = gice_rank();
	/* one rank: 4 devices; a job: gice_devices_per_rank() each (gicerun --devices-per-rank) */
	uint32_t nlocal = world == 1 ? 4 : gice_devices_per_rank(), ndev = world == 1 ? 4 : world * nlocal;
	struct dev dv[16];
	struct dev_pub *pub = calloc(ndev, sizeof(*pub));

	for (uint32_t i = 0; i < nlocal; i++) {
		struct dev *x = &dv[i];
		void *p;
		TRY(gice_device_open(NULL, &x->d));
		TRY(gice_stream_create(x->d, &x->s));
		TRY(gice_mem_alloc(x->d, 4 * BYTES, &p));
		x->buf = p;
		memset(x->buf, 0, 4 * BYTES);
		TRY(gice_mem_alloc(x->d, 4096, &p));
		x->errors = p;
		*x->errors = 0;
		x->sink = (double *)(x->errors + 8);
		TRY(gice_mem_register(x->d, x->buf, 4 * BYTES, &x->me.key));
		x->me.gid = gice_device_id(x->d);
		TRY(gice_counter_alloc(x->d, &x->me.sig));
		TRY(gice_counter_alloc(x->d, &x->me.credit));
		TRY(gice_counter_alloc(x->d, &x->send));
		TRY(gice_counter_alloc(x->d, &x->consumed));
		TRY(gice_counter_alloc(x->d, &x->credits_sent));
		TRY(gice_counter_alloc(x->d, &x->sent[0]));
		TRY(gice_counter_alloc(x->d, &x->sent[1]));
		pub[x->me.gid] = x->me; /* ring order = global device id */
	}
	for (uint32_t i = 0; world > 1 && i < nlocal; i++) { /* every rank's i-th device */
		struct dev_pub round[64];
		TRY(gice_allgather(&dv[i].me, sizeof(dv[i].me), round));
		for (uint32_t r = 0; r < world; r++)
			pub[round[r].gid] = round[r];
	}

	/* set-up: connections and armed persistent descriptors; the run needs nothing more */
	for (uint32_t i = 0; i < nlocal; i++) {
		struct dev *x = &dv[i];
		uint32_t pos = x->me.gid;
		struct dev_pub *right = &pub[(pos + 1) % ndev], *left = &pub[(pos + ndev - 1) % ndev];
		gice_conn_t to_right, to_left;
		gice_desc_t desc;
		TRY(gice_conn_open(x->d, right->gid, NULL, &to_right));
		TRY(gice_conn_open(x->d, left->gid, NULL, &to_left));
		for (int slot = 0; slot < 2; slot++) {
			gice_op_t put = {.type = GICE_OP_PUT, .conn = to_right, .local = x->buf + slot * BYTES,
					 .bytes = BYTES, .rkey = right->key, .roff = 2 * BYTES + slot * BYTES, .value = 1,
					 .signal = right->sig, .signal_flags = GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG,
					 .completion = x->sent[slot]};
			/* step s fires at send == s: slot 1 at 1, 3, 5...; slot 0 at 2, 4, 6... One
			 * trigger keeps the puts in step order (threshold order), as Portals does. */
			TRY(gice_arm(x->d, x->send, slot ? 1 : 2, 2, &put, &desc));
		}
		gice_op_t credit = {.type = GICE_OP_PUT, .conn = to_left, .bytes = 0, .rkey = left->key, .value = 1,
				    .signal = left->credit, .signal_flags = GICE_SIGNAL_ADD,
				    .completion = x->credits_sent};
		TRY(gice_arm(x->d, x->consumed, 1, 1, &credit, &desc));
		if (ckpt_dir)
			checkpoint_setup(x, ckpt_dir);
	}
	if (world > 1)
		TRY(gice_barrier()); /* every rank armed before any block flies */

	struct timespec c0, c1, c2;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t t0 = now_ns();
	for (uint32_t i = 0; i < nlocal; i++) {
		struct dev *x = &dv[i];
		uint32_t pos = x->me.gid;
		uint32_t left_gid = pub[(pos + ndev - 1) % ndev].gid;
		for (uint64_t s = 1; s <= STEPS; s++) {
			struct kargs a = {.buf = x->buf, .gid = x->me.gid, .left_gid = left_gid, .step = s,
					  .errors = x->errors, .sink = x->sink};
			if (s > 1) /* the block of step s-1 from the left is here */
				TRY(gice_stream_wait_value(x->s, x->me.sig, GICE_CMP_GE, s - 1, 0));
			if (s > 2) /* every earlier put from our outgoing slot s%2 has completed */
				TRY(gice_stream_wait_value(x->s, x->sent[s % 2], GICE_CMP_GE, (s - 1) / 2, 0));
			TRY(gice_launch(x->s, step_kernel, 4, &a, sizeof(a)));
			if (ckpt_dir) /* before the block's slot is written again, two steps on */
				checkpoint_step(x, s);
			if (s > 1) /* tell the left its block of step s-1 is consumed */
				TRY(gice_stream_write_value(x->s, x->consumed, 1, 1));
			if (s > 2) /* the right consumed the block we are about to overwrite there */
				TRY(gice_stream_wait_value(x->s, x->me.credit, GICE_CMP_GE, s - 2, 0));
			TRY(gice_stream_write_value(x->s, x->send, 1, 1)); /* fire step s's put */
		}
		/* drain: every message of this device has completed before anyone closes */
		TRY(gice_stream_wait_value(x->s, x->me.sig, GICE_CMP_GE, STEPS, 0));
		TRY(gice_stream_wait_value(x->s, x->me.credit, GICE_CMP_GE, STEPS - 1, 0));
		TRY(gice_stream_wait_value(x->s, x->credits_sent, GICE_CMP_GE, STEPS - 1, 0));
		TRY(gice_stream_wait_value(x->s, x->sent[0], GICE_CMP_GE, STEPS / 2, 0));
		TRY(gice_stream_wait_value(x->s, x->sent[1], GICE_CMP_GE, (STEPS + 1) / 2, 0));
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1); /* everything enqueued */
	for (uint32_t i = 0; i < nlocal; i++)
		TRY(gice_stream_sync(dv[i].s, 60000));
	uint64_t t1 = now_ns();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c2);
	double enq_us = (double)(c1.tv_sec - c0.tv_sec) * 1e6 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e3;
	double run_us = (double)(c2.tv_sec - c1.tv_sec) * 1e6 + (double)(c2.tv_nsec - c1.tv_nsec) / 1e3;

	uint64_t errors = 0;
	for (uint32_t i = 0; i < nlocal; i++)
		errors += *dv[i].errors;
	/* stages of this process's data puts, from the CTs' trace rings */
	double st[3][256 * 4];
	int n = 0;
	for (uint32_t i = 0; i < nlocal; i++) {
		gice_trace_t tr[256];
		uint32_t m = gice_device_trace(dv[i].d, tr, 256);
		for (uint32_t j = 0; j < m; j++) {
			if (tr[j].bytes != BYTES)
				continue;
			st[0][n] = (double)(tr[j].t_pickup - tr[j].t_issue) / 1e3;
			st[1][n] = (double)(tr[j].t_first_tx - tr[j].t_pickup) / 1e3;
			st[2][n] = (double)(tr[j].t_complete - tr[j].t_first_tx) / 1e3;
			n++;
		}
	}
	for (int k = 0; k < 3; k++)
		for (int a = 1; a < n; a++) /* insertion sort for the median */
			for (int b = a; b > 0 && st[k][b] < st[k][b - 1]; b--) {
				double t = st[k][b];
				st[k][b] = st[k][b - 1];
				st[k][b - 1] = t;
			}
	uint64_t msgs = (uint64_t)nlocal * STEPS * 2; /* data put + credit per step and device */
	if (rank == 0)
		printf("gice demo: %u device(s) in a ring (%u rank(s)), provider %s, %d steps of compute -> trigger -> "
		       "1 MiB put_signal -> next kernel\n",
		       ndev, world, gice_device_provider(dv[0].d), STEPS);
	printf("rank %u: %.1f ms, %.2f ms per step; host CPU: %.0f us to enqueue %d steps, then %.0f us (%.2f%% of "
	       "the run, %.2f us per message) while %llu messages flew\n",
	       rank, (double)(t1 - t0) / 1e6, (double)(t1 - t0) / 1e6 / STEPS, enq_us, STEPS, run_us,
	       run_us / ((double)(t1 - t0) / 1e3) * 100.0, run_us / (double)msgs, (unsigned long long)msgs);
	if (n)
		printf("rank %u: put stages, medians of %d (us): trigger -> CT pickup %.2f, pickup -> first byte out "
		       "%.2f, out -> delivered and acknowledged %.2f\n",
		       rank, n, st[0][n / 2], st[1][n / 2], st[2][n / 2]);
	printf("rank %u: data check: %s\n", rank, errors ? "FAILED" : "every block arrived intact");
	if (ckpt_dir) {
		uint64_t ck_bad = 0;
		for (uint32_t i = 0; i < nlocal; i++) {
			ck_bad += *dv[i].ckerrors;
			TRY(gice_file_close(dv[i].d, dv[i].file));
		}
		printf("rank %u: checkpoint: %d steps x %u device(s) of 1 MiB written to %s by trigger, reloaded by "
		       "trigger and checked on the device: %s\n",
		       rank, STEPS, nlocal, ckpt_dir, ck_bad ? "FAILED" : "every checkpoint intact");
		errors += ck_bad;
	}

	if (world > 1)
		TRY(gice_barrier());
	for (uint32_t i = 0; i < nlocal; i++) {
		TRY(gice_stream_destroy(dv[i].s));
		TRY(gice_device_close(dv[i].d));
	}
	free(pub);
	gice_finalize();
	return errors ? 1 : 0;
}
