/* fab_fault_pace.c: rate caps of the fault injector (rate=, see fab_fault.h): a token bucket per
 * destination device, refilled at the cap, holding 1 ms of it (at least two packets: a burst after an
 * idle gap stays short, and a sender descheduled for less than that loses nothing). A
 * message may go while the bucket is not empty, and takes its bytes even if that makes it
 * negative: a message larger than the bucket still goes, and the long-run rate is the cap
 * exactly. When the bucket is empty the send is refused with GICE_ERR_AGAIN, as a full NIC
 * queue would, and the engine tries again at its next pass. Sender thread only. */
#include "fabric/fab_fault_internal.h"

int ff_pace_ready(ff_ep_t *w, ff_peer_t *p, uint64_t rate, uint64_t now)
{
	double burst = GICE_MAX((double)rate / 1000.0, 2.0 * (double)w->base.max_packet);

	if (!p->t_fill || now < p->t_fill) {
		p->tokens = burst; /* first use: a full bucket */
	} else {
		p->tokens += (double)(now - p->t_fill) * (double)rate / 1e9;
		if (p->tokens > burst)
			p->tokens = burst;
	}
	p->t_fill = now;
	return p->tokens > 0;
}

void ff_pace_spend(ff_peer_t *p, size_t len) { p->tokens -= (double)len; }
