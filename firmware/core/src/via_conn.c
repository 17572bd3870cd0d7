/* Connection set-up and tear-down between two nodes' firmware, over management frames.
 *
 * Client: CONNECT_REQUEST is repeated every NV_VIA_RETRY_US until the server answers ACCEPT or
 * REJECT, or the timeout passes. Server: a request waits in a small table until the host takes it
 * (CONNECT_WAIT) and accepts or rejects it; a repeated request is answered again, so a lost answer
 * costs one retry. Both sides offer an RDMA buffer (address, handle, length) in the exchange, the
 * paper's proposed improvement: after connecting, each side can RDMA without another message.
 * Disconnecting fails the VI (the engine flushes its descriptors), returns it to IDLE and tells
 * the peer, which does the same and acknowledges. */
#include <stddef.h>
#include <string.h>

#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

#define MSG_WORDS (NV_MGMT_MESSAGE_SIZE / 4)
#define GET(words, field) nv_get_field(words, NV_MGMT_MESSAGE_##field##_OFFSET, NV_MGMT_MESSAGE_##field##_BYTES)
#define PUT(words, field, v) nv_put_field(words, NV_MGMT_MESSAGE_##field##_OFFSET, NV_MGMT_MESSAGE_##field##_BYTES, v)
#define ARG(cmd, name) args[NV_MBOX_##cmd##_ARG_##name]
#define RES(cmd, name) args[NV_MBOX_##cmd##_RES_##name]
#define NO_VI 0xffffu

static void send_message(struct nv_via *via, unsigned node, unsigned type, unsigned src_vi, unsigned dst_vi,
                         uint32_t discriminator, uint32_t request_id, const struct nv_via_buffer *buffer)
{
    uint32_t words[MSG_WORDS] = {0};
    PUT(words, TYPE, type);
    PUT(words, SRC_VI, src_vi);
    PUT(words, DST_VI, dst_vi);
    PUT(words, DISCRIMINATOR, discriminator);
    PUT(words, REQUEST_ID, request_id);
    if (buffer != NULL && buffer->handle != NV_MBOX_NONE) {
        PUT(words, FLAGS, NV_MGMT_MESSAGE_FLAGS_HAS_BUFFER_MASK);
        PUT(words, BUF_VA, buffer->va);
        PUT(words, BUF_HANDLE, buffer->handle);
        PUT(words, BUF_LENGTH, buffer->length);
    }
    uint64_t deadline = nv_via_deadline(via, NV_VIA_RETRY_US);
    while (nv_reg_read(NV_VIA_MGMT_TX_STATUS) & NV_VIA_MGMT_TX_STATUS_BUSY_MASK)
        if (nv_via_expired(deadline))
            return; /* the link is stuck; the retry will try again */
    for (unsigned i = 0; i < MSG_WORDS; i++)
        nv_reg_write(NV_VIA_MGMT_TX_DATA_WORD_AT(i), words[i]);
    nv_reg_write(NV_VIA_MGMT_TX_CTRL, (node << NV_VIA_MGMT_TX_CTRL_DST_NODE_SHIFT) |
                                          (NV_MGMT_MESSAGE_SIZE << NV_VIA_MGMT_TX_CTRL_LENGTH_SHIFT));
    (void)via;
}

static struct nv_via_buffer buffer_args(uint32_t va_lo, uint32_t va_hi, uint32_t handle, uint32_t length)
{
    struct nv_via_buffer b = {.va = (uint64_t)va_hi << 32 | va_lo, .handle = handle, .length = length};
    return b;
}

static void put_buffer(uint32_t *va_lo, uint32_t *va_hi, uint32_t *handle, uint32_t *length,
                       const struct nv_via_buffer *b)
{
    *va_lo = (uint32_t)b->va;
    *va_hi = (uint32_t)(b->va >> 32);
    *handle = b->handle;
    *length = b->length;
}

static void connect_vi(unsigned vi, unsigned node, unsigned peer_vi)
{
    nv_reg_write(NV_VIA_VI_PEER_AT(vi), node << NV_VIA_VI_PEER_NODE_SHIFT | peer_vi << NV_VIA_VI_PEER_VI_SHIFT);
    nv_reg_write(NV_VIA_VI_CMD_AT(vi), NV_VIA_VI_CMD_CONNECT_MASK);
}

/* The server's CONNECT_ACCEPT for VI `vi`, which accepted its client's request. */
static void send_accept(struct nv_via *via, unsigned vi)
{
    const struct nv_via_vi *v = &via->vi[vi];
    send_message(via, v->peer_node, NV_MGMT_TYPE_CONNECT_ACCEPT, vi, v->peer_vi, v->discriminator, v->request_id,
                 &v->local);
}

uint32_t nv_via_connection_command(struct nv_via *via, uint32_t code, uint32_t args[16])
{
    switch (code) {
    case NV_MBOX_CONNECT_REQUEST: {
        uint32_t vi = ARG(CONNECT_REQUEST, VI), node = ARG(CONNECT_REQUEST, NODE);
        if (!nv_via_vi_valid(via, vi) || node > NV_NODE_ID_MASK || node == via->node_id)
            return NV_VIP_INVALID_PARAMETER;
        struct nv_via_vi *v = &via->vi[vi];
        if (v->conn != NV_CONN_NONE || nv_via_vi_state(vi) != NV_VI_STATE_IDLE)
            return NV_VIP_INVALID_STATE;
        uint32_t timeout = ARG(CONNECT_REQUEST, TIMEOUT_US);
        v->conn = NV_CONN_REQUESTING;
        v->peer_node = (uint8_t)node;
        v->discriminator = ARG(CONNECT_REQUEST, DISCRIMINATOR);
        v->request_id = ++via->next_request_id;
        v->local = buffer_args(ARG(CONNECT_REQUEST, BUF_VA_LO), ARG(CONNECT_REQUEST, BUF_VA_HI),
                               ARG(CONNECT_REQUEST, BUF_HANDLE), ARG(CONNECT_REQUEST, BUF_LENGTH));
        v->remote.handle = NV_MBOX_NONE;
        v->deadline = nv_via_deadline(via, timeout ? timeout : NV_VIA_CONNECT_TIMEOUT_US);
        v->next_retry = 0; /* send now */
        return NV_VIP_SUCCESS;
    }
    case NV_MBOX_CONNECT_STATUS: {
        uint32_t vi = ARG(CONNECT_STATUS, VI);
        if (!nv_via_vi_valid(via, vi))
            return NV_VIP_INVALID_PARAMETER;
        struct nv_via_vi *v = &via->vi[vi];
        switch (v->conn) {
        case NV_CONN_REQUESTING: return NV_VIP_NOT_DONE;
        case NV_CONN_CONNECTED:
            RES(CONNECT_STATUS, NODE) = v->peer_node;
            RES(CONNECT_STATUS, PEER_VI) = v->peer_vi;
            put_buffer(&RES(CONNECT_STATUS, BUF_VA_LO), &RES(CONNECT_STATUS, BUF_VA_HI),
                       &RES(CONNECT_STATUS, BUF_HANDLE), &RES(CONNECT_STATUS, BUF_LENGTH), &v->remote);
            return NV_VIP_SUCCESS;
        case NV_CONN_REJECTED: v->conn = NV_CONN_NONE; return NV_VIP_REJECT;
        case NV_CONN_TIMED_OUT: v->conn = NV_CONN_NONE; return NV_VIP_TIMEOUT;
        }
        return NV_VIP_INVALID_STATE;
    }
    case NV_MBOX_CONNECT_WAIT:
        for (unsigned i = 0; i < NV_VIA_MAX_REQUESTS; i++) {
            struct nv_via_request *r = &via->requests[i];
            if (r->state == NV_REQ_PENDING && r->discriminator == ARG(CONNECT_WAIT, DISCRIMINATOR)) {
                r->state = NV_REQ_HANDED;
                RES(CONNECT_WAIT, REQUEST) = i;
                RES(CONNECT_WAIT, NODE) = r->node;
                RES(CONNECT_WAIT, PEER_VI) = r->vi;
                put_buffer(&RES(CONNECT_WAIT, BUF_VA_LO), &RES(CONNECT_WAIT, BUF_VA_HI), &RES(CONNECT_WAIT, BUF_HANDLE),
                           &RES(CONNECT_WAIT, BUF_LENGTH), &r->remote);
                return NV_VIP_SUCCESS;
            }
        }
        return NV_VIP_NOT_DONE;
    case NV_MBOX_CONNECT_ACCEPT: {
        uint32_t i = ARG(CONNECT_ACCEPT, REQUEST), vi = ARG(CONNECT_ACCEPT, VI);
        if (i >= NV_VIA_MAX_REQUESTS || via->requests[i].state != NV_REQ_HANDED)
            return NV_VIP_NO_MATCH;
        if (!nv_via_vi_valid(via, vi))
            return NV_VIP_INVALID_PARAMETER;
        struct nv_via_vi *v = &via->vi[vi];
        if (v->conn != NV_CONN_NONE || nv_via_vi_state(vi) != NV_VI_STATE_IDLE)
            return NV_VIP_INVALID_STATE;
        struct nv_via_request *r = &via->requests[i];
        v->conn = NV_CONN_CONNECTED;
        v->accepted = 1;
        v->peer_node = r->node;
        v->peer_vi = r->vi;
        v->discriminator = r->discriminator;
        v->request_id = r->request_id;
        v->local = buffer_args(ARG(CONNECT_ACCEPT, BUF_VA_LO), ARG(CONNECT_ACCEPT, BUF_VA_HI),
                               ARG(CONNECT_ACCEPT, BUF_HANDLE), ARG(CONNECT_ACCEPT, BUF_LENGTH));
        v->remote = r->remote;
        r->state = NV_REQ_FREE;
        connect_vi(vi, v->peer_node, v->peer_vi);
        send_accept(via, vi);
        return NV_VIP_SUCCESS;
    }
    case NV_MBOX_CONNECT_REJECT: {
        uint32_t i = ARG(CONNECT_REJECT, REQUEST);
        if (i >= NV_VIA_MAX_REQUESTS || via->requests[i].state != NV_REQ_HANDED)
            return NV_VIP_NO_MATCH;
        struct nv_via_request *r = &via->requests[i];
        send_message(via, r->node, NV_MGMT_TYPE_CONNECT_REJECT, NO_VI, r->vi, r->discriminator, r->request_id, NULL);
        r->state = NV_REQ_FREE;
        return NV_VIP_SUCCESS;
    }
    case NV_MBOX_DISCONNECT: {
        uint32_t vi = ARG(DISCONNECT, VI);
        if (!nv_via_vi_valid(via, vi))
            return NV_VIP_INVALID_PARAMETER;
        struct nv_via_vi *v = &via->vi[vi];
        uint32_t result = nv_via_reset_vi(via, vi);
        v->accepted = 0;
        if (v->conn == NV_CONN_CONNECTED || v->conn == NV_CONN_DISCONNECTING) {
            v->conn = NV_CONN_DISCONNECTING;
            v->deadline = nv_via_deadline(via, NV_VIA_CONNECT_TIMEOUT_US);
            v->next_retry = 0;
        } else {
            v->conn = NV_CONN_NONE;
        }
        return result;
    }
    }
    return NV_VIP_INVALID_FUNCTION;
}

void nv_via_connection_timers(struct nv_via *via)
{
    for (unsigned i = 0; i < via->vis; i++) {
        struct nv_via_vi *v = &via->vi[i];
        if (v->conn != NV_CONN_REQUESTING && v->conn != NV_CONN_DISCONNECTING)
            continue;
        if (nv_via_expired(v->deadline)) {
            if (v->conn == NV_CONN_REQUESTING) {
                nv_log("via: VI %u: node %u did not answer the connection request\n", i, v->peer_node);
                v->conn = NV_CONN_TIMED_OUT;
            } else {
                v->conn = NV_CONN_NONE; /* the peer is gone: our side is reset already */
            }
            continue;
        }
        if (v->next_retry != 0 && !nv_via_expired(v->next_retry))
            continue;
        v->next_retry = nv_via_deadline(via, NV_VIA_RETRY_US);
        if (v->conn == NV_CONN_REQUESTING)
            send_message(via, v->peer_node, NV_MGMT_TYPE_CONNECT_REQUEST, i, NO_VI, v->discriminator, v->request_id,
                         &v->local);
        else
            send_message(via, v->peer_node, NV_MGMT_TYPE_DISCONNECT, i, v->peer_vi, v->discriminator, v->request_id,
                         NULL);
    }
}

uint64_t nv_via_next_timer(const struct nv_via *via)
{
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < via->vis; i++) {
        const struct nv_via_vi *v = &via->vi[i];
        if (v->conn != NV_CONN_REQUESTING && v->conn != NV_CONN_DISCONNECTING)
            continue;
        /* The same two times nv_via_connection_timers acts on (a next_retry of 0: at once). */
        uint64_t due = v->next_retry < v->deadline ? v->next_retry : v->deadline;
        if (due < next)
            next = due;
    }
    return next;
}

static struct nv_via_buffer message_buffer(const uint32_t *words)
{
    struct nv_via_buffer b = {.va = 0, .handle = NV_MBOX_NONE, .length = 0};
    if (GET(words, FLAGS) & NV_MGMT_MESSAGE_FLAGS_HAS_BUFFER_MASK) {
        b.va = GET(words, BUF_VA);
        b.handle = (uint32_t)GET(words, BUF_HANDLE);
        b.length = (uint32_t)GET(words, BUF_LENGTH);
    }
    return b;
}

static void on_request(struct nv_via *via, unsigned node, const uint32_t *words)
{
    unsigned src_vi = (unsigned)GET(words, SRC_VI);
    uint32_t request_id = (uint32_t)GET(words, REQUEST_ID);
    for (unsigned vi = 0; vi < via->vis; vi++) {
        const struct nv_via_vi *v = &via->vi[vi];
        if (v->accepted && v->conn == NV_CONN_CONNECTED && v->peer_node == node && v->peer_vi == src_vi &&
            v->request_id == request_id) {
            send_accept(via, vi); /* our ACCEPT was lost: say it again */
            return;
        }
    }
    struct nv_via_request *free_entry = NULL;
    for (unsigned i = 0; i < NV_VIA_MAX_REQUESTS; i++) {
        struct nv_via_request *r = &via->requests[i];
        if (r->state == NV_REQ_FREE) {
            if (free_entry == NULL)
                free_entry = r;
        } else if (r->node == node && r->vi == src_vi && r->request_id == request_id) {
            return; /* waiting for the host already */
        }
    }
    if (free_entry == NULL) {
        nv_log("via: connection request from node %u dropped: %u requests pending\n", node, NV_VIA_MAX_REQUESTS);
        return; /* the client will ask again */
    }
    free_entry->state = NV_REQ_PENDING;
    free_entry->node = (uint8_t)node;
    free_entry->vi = (uint8_t)src_vi;
    free_entry->discriminator = (uint32_t)GET(words, DISCRIMINATOR);
    free_entry->request_id = request_id;
    free_entry->remote = message_buffer(words);
}

void nv_via_handle_mgmt(struct nv_via *via, unsigned src_node, const uint32_t *payload, unsigned length)
{
    if (length < NV_MGMT_MESSAGE_SIZE)
        return;
    uint32_t words[MSG_WORDS];
    memcpy(words, payload, sizeof words);
    unsigned type = (unsigned)GET(words, TYPE);
    unsigned src_vi = (unsigned)GET(words, SRC_VI), dst_vi = (unsigned)GET(words, DST_VI);
    uint32_t request_id = (uint32_t)GET(words, REQUEST_ID);
    struct nv_via_vi *v = dst_vi < via->vis ? &via->vi[dst_vi] : NULL;
    switch (type) {
    case NV_MGMT_TYPE_CONNECT_REQUEST: on_request(via, src_node, words); break;
    case NV_MGMT_TYPE_CONNECT_ACCEPT:
        if (v != NULL && v->conn == NV_CONN_REQUESTING && v->peer_node == src_node && v->request_id == request_id) {
            v->peer_vi = (uint8_t)src_vi;
            v->remote = message_buffer(words);
            v->conn = NV_CONN_CONNECTED;
            connect_vi(dst_vi, src_node, src_vi);
        }
        break;
    case NV_MGMT_TYPE_CONNECT_REJECT:
        if (v != NULL && v->conn == NV_CONN_REQUESTING && v->peer_node == src_node && v->request_id == request_id)
            v->conn = NV_CONN_REJECTED;
        break;
    case NV_MGMT_TYPE_DISCONNECT:
        if (v != NULL && v->conn == NV_CONN_CONNECTED && v->peer_node == src_node && v->peer_vi == src_vi) {
            nv_via_reset_vi(via, dst_vi);
            v->conn = NV_CONN_NONE;
            v->accepted = 0;
        }
        send_message(via, src_node, NV_MGMT_TYPE_DISCONNECT_ACK, dst_vi, src_vi, 0, request_id, NULL);
        break;
    case NV_MGMT_TYPE_DISCONNECT_ACK:
        if (v != NULL && v->conn == NV_CONN_DISCONNECTING && v->peer_node == src_node)
            v->conn = NV_CONN_NONE;
        break;
    }
}
