/* stress_kernels.c: gice-bench stress on the devices — the content streams every byte is
 * checked against, and the kernels of its two phases (bench_stress.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "tools/bench/bench.h"
#include "tools/bench/bench_stress.h"

static inline uint64_t mix64(uint64_t x) /* splitmix64's finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Byte j of content stream s is byte j % 8 (little-endian) of word(base(s), j / 8). */
uint64_t stress_base(uint64_t stream) { return mix64(opt.seed ^ mix64(stream + 0x632be59bd9b4e019ull)); }
static inline uint64_t stress_word(uint64_t base, uint64_t w) { return mix64(base + (w + 1) * 0x9e3779b97f4a7c15ull); }

static inline void store_le64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++, x >>= 8)
		p[i] = (uint8_t)x;
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

void stress_fill(uint8_t *p, size_t n, uint64_t base)
{
	size_t w = 0;
	for (; w * 8 + 8 <= n; w++)
		store_le64(p + w * 8, stress_word(base, w));
	uint64_t x = stress_word(base, w);
	for (size_t j = w * 8; j < n; j++, x >>= 8)
		p[j] = (uint8_t)x;
}

/* First offset where p differs from stream base, with the expected and found bytes; -1 if none. */
long stress_check(const uint8_t *p, size_t n, uint64_t base, uint8_t *expect, uint8_t *found)
{
	for (size_t w = 0; w * 8 < n; w++) {
		uint64_t x = stress_word(base, w);
		size_t end = w * 8 + 8 < n ? w * 8 + 8 : n;
		if (end == w * 8 + 8 && load_le64(p + w * 8) == x)
			continue;
		for (size_t j = w * 8; j < end; j++, x >>= 8)
			if (p[j] != (uint8_t)x) {
				*expect = (uint8_t)x;
				*found = p[j];
				return (long)j;
			}
	}
	return -1;
}

/* Size of put i: 1 and 64 KiB for the first two, then 1 + a random number below 2^k with k
 * uniform in 0..16 (log-uniform: mostly small, every size class up to 64 KiB). */
uint32_t stress_size(long i)
{
	if (i < 2)
		return i == 0 ? 1 : STRESS_MAX_PUT;
	uint64_t r = mix64(opt.seed * 0xd1b54a32d192ed03ull + (uint64_t)i);
	uint32_t k = (uint32_t)(r % 17);
	return 1 + (uint32_t)((r >> 8) & ((1ull << k) - 1));
}

static void kfail(struct kstate *ks, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void kfail(struct kstate *ks, int rc, const char *fmt, ...)
{
	va_list ap;

	if (ks->rc)
		return;
	ks->rc = rc ? rc : STRESS_CORRUPT;
	va_start(ap, fmt);
	vsnprintf(ks->msg, sizeof(ks->msg), fmt, ap);
	va_end(ap);
}

static void kdone(struct kstate *ks)
{
	ks->t_end = now_ns();
	atomic_store_explicit(&ks->finished, 1, memory_order_release);
}

/* Wait until counter c >= target, at most tmo_us; on failure record what was awaited. */
static int swait(gice_kctx_t *k, struct kstate *ks, gice_counter_t c, uint64_t target, uint64_t tmo_us,
		 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int swait(gice_kctx_t *k, struct kstate *ks, gice_counter_t c, uint64_t target, uint64_t tmo_us,
		 const char *fmt, ...)
{
	uint64_t found = 0;
	char what[256];
	va_list ap;
	int rc = gice_wait_until(k, c, GICE_CMP_GE, target, tmo_us, &found);

	if (!rc) {
		atomic_fetch_add_explicit(&ks->progress, 1, memory_order_relaxed);
		return 0;
	}
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	kfail(ks, rc, "%s: %s (%s): counter %u at %llu, expected %llu%s", what, gice_status_name(rc),
	      gice_status_str(rc), c, (unsigned long long)found, (unsigned long long)target,
	      rc == GICE_ERR_TIMED_OUT ? " (--timeout-ms)" : "");
	return rc;
}

void s1_sender(gice_kctx_t *k, void *a_)
{
	struct s1_args *a = a_;
	long W = a->window, nwin = (a->iters + W - 1) / W;

	for (long w = 0; w < nwin; w++) {
		long lo = w * W, hi = lo + W < a->iters ? lo + W : a->iters;
		/* at most one window in flight: its sources are reused two windows on */
		if (w >= 1 && swait(k, a->ks, a->done, (uint64_t)lo, a->tmo_us,
				    "puts %ld..%ld to device %u: waiting for their acknowledgements", lo - W, lo - 1,
				    a->peer))
			goto out;
		/* the ring slots of window w - 2 are free once B has verified them */
		if (w >= 2 && swait(k, a->ks, a->sig, (uint64_t)(w - 1), a->tmo_us,
				    "puts %ld..%ld: waiting for device %u to verify them (credit %ld)", lo - 2 * W,
				    lo - W - 1, a->peer, w - 1))
			goto out;
		for (long i = lo; i < hi; i++) {
			size_t slot = (size_t)(w & 1) * (size_t)W + (size_t)(i - lo);
			uint8_t *src = a->ring + slot * STRESS_MAX_PUT;
			stress_fill(src, a->sizes[i], stress_base((uint64_t)i));
			int rc = gice_put_signal(k, a->c, a->peer_ring_key, slot * STRESS_MAX_PUT, src, a->sizes[i],
						 a->peer_sig, 1, GICE_SIGNAL_ADD, a->done);
			if (rc) {
				kfail(a->ks, rc, "put %ld (%u B to device %u): gice_put_signal: %s (%s)", i, a->sizes[i],
				      a->peer, gice_status_name(rc), gice_status_str(rc));
				goto out;
			}
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	if (!swait(k, a->ks, a->done, (uint64_t)a->iters, a->tmo_us,
		   "all %ld puts to device %u: waiting for their acknowledgements", a->iters, a->peer))
		swait(k, a->ks, a->sig, (uint64_t)nwin, a->tmo_us, "all %ld puts: waiting for device %u to verify them",
		      a->iters, a->peer);
out:
	kdone(a->ks);
}

void s1_verifier(gice_kctx_t *k, void *a_)
{
	struct s1_args *a = a_;
	long W = a->window, nwin = (a->iters + W - 1) / W;

	for (long w = 0; w < nwin; w++) {
		long lo = w * W, hi = lo + W < a->iters ? lo + W : a->iters;
		if (swait(k, a->ks, a->sig, (uint64_t)hi, a->tmo_us, "puts %ld..%ld from device %u: waiting for their signals",
			  lo, hi - 1, a->peer))
			goto out;
		for (long i = lo; i < hi; i++) {
			size_t slot = (size_t)(w & 1) * (size_t)W + (size_t)(i - lo);
			uint8_t e = 0, f = 0;
			long off = stress_check(a->ring + slot * STRESS_MAX_PUT, a->sizes[i], stress_base((uint64_t)i), &e, &f);
			if (off >= 0) {
				kfail(a->ks, STRESS_CORRUPT,
				      "put %ld (%u B from device %u, ring slot %zu) corrupt: first bad byte at offset %ld: "
				      "expected 0x%02x, found 0x%02x",
				      i, a->sizes[i], a->peer, slot, off, e, f);
				goto out;
			}
		}
		int rc = gice_put_signal(k, a->c, a->peer_scratch_key, 0, a->scratch, 8, a->peer_sig, 1, GICE_SIGNAL_ADD,
					 a->done);
		if (rc) {
			kfail(a->ks, rc, "credit %ld to device %u: gice_put_signal: %s (%s)", w + 1, a->peer,
			      gice_status_name(rc), gice_status_str(rc));
			goto out;
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	swait(k, a->ks, a->done, (uint64_t)nwin, a->tmo_us, "%ld credits to device %u: waiting for their acknowledgements",
	      nwin, a->peer);
out:
	kdone(a->ks);
}

/* Both devices at once: send src in chunks, then verify what the peer sent into dst. */
void s2_kernel(gice_kctx_t *k, void *a_)
{
	struct s2_args *a = a_;
	size_t n = (a->bytes + a->chunk - 1) / a->chunk;
	uint8_t e = 0, f = 0;
	long off;

	for (size_t c = 0; c < n; c++) {
		size_t o = c * a->chunk, len = a->bytes - o < a->chunk ? a->bytes - o : a->chunk;
		if (c >= a->window && swait(k, a->ks, a->done, c - a->window + 1, a->tmo_us,
					    "exchange to device %u: waiting for acknowledgements before chunk %zu", a->peer,
					    c))
			goto out;
		int rc = gice_put_signal(k, a->c, a->peer_dst_key, o, a->src + o, len, a->peer_sig, 1, GICE_SIGNAL_ADD,
					 a->done);
		if (rc) {
			kfail(a->ks, rc, "exchange to device %u: chunk %zu (%zu B at offset %zu): gice_put_signal: %s (%s)",
			      a->peer, c, len, o, gice_status_name(rc), gice_status_str(rc));
			goto out;
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	if (swait(k, a->ks, a->sig, n, a->tmo_us, "exchange from device %u: waiting for the signals of its %zu chunks",
		  a->peer, n))
		goto out;
	off = stress_check(a->dst, a->bytes, stress_base(STRESS_XCHG + (uint64_t)(1 - a->role)), &e, &f);
	if (off >= 0) {
		size_t c = (size_t)off / a->chunk, o = c * a->chunk;
		kfail(a->ks, STRESS_CORRUPT,
		      "exchange from device %u corrupt: chunk %zu (%zu B at offset %zu): first bad byte at offset %ld: "
		      "expected 0x%02x, found 0x%02x",
		      a->peer, c, a->bytes - o < a->chunk ? a->bytes - o : a->chunk, o, off, e, f);
		goto out;
	}
	swait(k, a->ks, a->done, n, a->tmo_us, "exchange to device %u: waiting for the acknowledgements of its %zu chunks",
	      a->peer, n);
out:
	kdone(a->ks);
}
