/* fab_ofi_internal.h: what the ofi backend's files share (not for other modules): fab_ofi.c
 * (an endpoint's data path: send, poll, reads), fab_ofi_open.c (opening and closing one),
 * fab_addr.c (socket interfaces and addresses), fab_shm.c (shm leftovers). */
#ifndef GICE_FAB_OFI_INTERNAL_H
#define GICE_FAB_OFI_INTERNAL_H

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "fabric/fabric.h"

#define OFI_STRIDE_ALIGN GICE_CACHELINE
#define OFI_CQ_BATCH 16
#define OFI_NO_PEER FAB_ADDR_UNKNOWN

extern const fab_ops_t fab_ofi_ops;

enum { OFI_RX_POSTED, OFI_RX_DONE, OFI_RX_ERR, OFI_RX_USER, OFI_RX_IDLE /* released, waiting to be posted */ };

typedef struct {
	struct fi_context2 ctx; /* first: the completion's op_context points here */
	void *data;
	fab_addr_t dest; /* tx: destination of the send in flight; rx: sender (FI_SOURCE), or
			  * OFI_NO_PEER when the provider cannot name it */
	size_t len;      /* rx: bytes received */
	uint32_t idx;
	uint8_t state;   /* rx: OFI_RX_* */
	int8_t status;   /* rx: GICE_ERR_* of an OFI_RX_ERR completion */
} ofi_buf_t;

typedef struct {
	fab_ep_t base; /* first: fab_ep_t * and ofi_ep_t * convert */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc; /* fi_mr_desc of mr, or NULL */

	void *mem; /* tx_depth + rx_depth buffers + one staging buffer, stride apart */
	size_t mem_len, stride, max_packet, inject_size;
	ofi_buf_t *bufs; /* [0, tx_depth): tx, [tx_depth, tx_depth + rx_depth): rx */
	uint32_t tx_depth, rx_depth;
	uint32_t *tx_free; /* stack of free tx buffer indices */
	uint32_t ntx_free;
	uint32_t *rx_pending; /* rx buffers released but not yet reposted (at the next poll) */
	uint32_t nrx_pending;
	void *staging; /* fi_inject source */

	/* Posted receive buffers in the order they were posted. Untagged receives are matched in
	 * posting order and FI_ORDER_SAS makes the matching order the send order, but completions
	 * may come out of order: tcp;ofi_rxm 1.17 completes a message above its 16 KiB eager limit
	 * (SAR) after a smaller eager one sent later. Delivering only from the head of this ring
	 * restores the send order. */
	uint32_t *rx_fifo;
	uint32_t rx_head, rx_count;

	fab_event_t *errs; /* ring of send-error events waiting for poll */
	uint32_t errs_cap, errs_head, errs_len;

	int wait_fd; /* of the cq (FI_WAIT_FD), or -1 */

	/* remote reads: the region reads land in (local access only), read contexts, completed
	 * reads waiting for poll */
	struct fid_mr *rma_mr;
	void *rma_base, *rma_desc;
	size_t rma_len;
	struct ofi_read {
		struct fi_context2 ctx; /* first: op_context points here */
		void *user;
	} reads[FAB_READS_MAX];
	uint32_t read_free[FAB_READS_MAX], nread_free;
	fab_event_t read_done[FAB_READS_MAX];
	uint32_t nread_done;
	uint64_t nerr_cq, nerr_send, nerr_post; /* for rate-limited logging */
} ofi_ep_t;


/* Log the 1st, 2nd, 4th, 8th... occurrence of a per-packet error. */
static inline int ofi_ratelimit(uint64_t *n)
{
	uint64_t c = ++*n;
	return !(c & (c - 1));
}

/* The one place where libfabric errors (positive FI_E* / errno values) become gice codes. */
static inline int ofi_status(int fi_err)
{
	switch (fi_err < 0 ? -fi_err : fi_err) {
	case 0: return GICE_OK;
	case FI_EAGAIN: return GICE_ERR_AGAIN;
	case FI_ENOMEM: return GICE_ERR_NO_MEMORY;
	case FI_EINVAL: return GICE_ERR_INVALID;
	case FI_ENODATA:
	case FI_ENOENT: return GICE_ERR_NOT_FOUND;
	case FI_ENOSYS:
	case FI_EOPNOTSUPP: return GICE_ERR_UNSUPPORTED;
	case FI_ETRUNC:
	case FI_EMSGSIZE:
	case FI_ETOOSMALL: return GICE_ERR_BAD_PACKET;
	case FI_ECANCELED: return GICE_ERR_CANCELED;
	case FI_ETIMEDOUT: return GICE_ERR_TIMED_OUT;
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_EADDRNOTAVAIL:
	case FI_ESHUTDOWN:
	case EPIPE: return GICE_ERR_PEER_DEAD;
	case FI_EIO: return GICE_ERR_IO;
	case FI_EBUSY: return GICE_ERR_BUSY;
	default: return GICE_ERR_FABRIC;
	}
}

static inline ofi_ep_t *ofi_ep(fab_ep_t *e) { return (ofi_ep_t *)e; }

/* fab_ofi.c: post receive buffer b (it joins rx_fifo). */
int ofi_post_rx(ofi_ep_t *e, ofi_buf_t *b);
/* fab_ofi_open.c: the backend's open and close (fab_ofi_ops). */
int ofi_open(const fab_attr_t *attr, fab_ep_t **out);
void ofi_close(fab_ep_t *ep);

/* Indexes in fab_params (fabric.c). */
enum { P_PROVIDER, P_IFACE, P_TX_DEPTH, P_RX_DEPTH, P_RXM_MSG_RX };

/* fab_addr.c: copy GICE_FAB_IFACE into the socket providers' unset interface variables. */
void fab_ofi_bind_iface(void);
/* Copy GICE_FAB_RXM_MSG_RX into FI_OFI_RXM_MSG_RX_SIZE when that is unset (fab_addr.c). */
int fab_ofi_bound_rxm(void);

/* fab_shm.c: remove the shm regions a dead process left under our pid. */
void fab_ofi_sweep_stale_shm(void);

#endif
