// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Socket-level load balancing for Kubernetes Services.
 *
 * These cgroup socket-address programs translate a Service address to one of its
 * endpoints when a local socket connects (TCP, connected UDP) or sends a datagram
 * (unconnected UDP), and translate back whatever the application reads (recvmsg,
 * getpeername), so the application sees only the Service address while every packet
 * goes to the endpoint directly: no NAT, no conntrack entry for the translation.
 *
 * Lookup chain: frontends[(family, addr, port, proto)] -> set id;
 * sets[id] -> (count, flags, affinity); backends[(id, slot)] for slot < count.
 * The Go side writes new slots before it raises a count and lowers a count before it
 * deletes slots, so a reader never sees a slot that is not written.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FAMILY_V4 4
#define FAMILY_V6 6

/* The set has no usable endpoint anywhere: fail the connect or send. */
#define SET_F_REJECT 1

/* connect() and sendmsg() of a rejected Service fail with this errno, as the
 * REJECT rules make a TCP connect fail (bpf_set_retval; without it the hook's
 * denial is EPERM). */
#define REJECT_ERRNO 111 /* ECONNREFUSED */

char __license[] SEC("license") = "Dual BSD/GPL";

struct fe_key {
	__u32 addr[4]; /* network byte order; IPv4 in addr[0] */
	__u16 port;    /* host byte order */
	__u8 proto;    /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP */
	__u8 family;   /* FAMILY_V4 or FAMILY_V6 */
};

struct fe_val {
	__u32 set_id;
};

struct set_val {
	__u32 count;
	__u32 flags;
	__u32 affinity_sec; /* 0: no session affinity */
	__u32 pad;
};

struct be_key {
	__u32 set_id;
	__u32 slot;
};

struct be_val {
	__u32 addr[4];
	__u16 port;
	__u16 pad;
};

/* Session affinity is per client network namespace: at connect() the source
 * address is usually not chosen yet, and on a node every pod is its own netns. */
struct aff_key {
	__u64 netns;
	__u32 set_id;
	__u32 pad;
};

struct aff_val {
	__u64 last_ns;
	struct be_val be;
	__u32 slot;
	__u32 pad;
};

/* Reverse translation, keyed by the socket and the endpoint it talks to, so one
 * unconnected UDP socket may talk to several Services. */
struct rev_key {
	__u64 cookie;
	__u32 addr[4];
	__u16 port;
	__u8 family;
	__u8 pad;
	__u32 pad2;
};

struct rev_val {
	__u32 addr[4];
	__u16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 131072);
	__type(key, struct fe_key);
	__type(value, struct fe_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} frontends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 131072);
	__type(key, __u32);
	__type(value, struct set_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 524288);
	__type(key, struct be_key);
	__type(value, struct be_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct aff_key);
	__type(value, struct aff_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rev_key);
	__type(value, struct rev_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} revnat SEC(".maps");

static __always_inline void read_dst(struct bpf_sock_addr *ctx, __u8 family, __u32 addr[4])
{
	if (family == FAMILY_V4) {
		addr[0] = ctx->user_ip4;
		addr[1] = 0;
		addr[2] = 0;
		addr[3] = 0;
	} else {
		addr[0] = ctx->user_ip6[0];
		addr[1] = ctx->user_ip6[1];
		addr[2] = ctx->user_ip6[2];
		addr[3] = ctx->user_ip6[3];
	}
}

static __always_inline void write_dst(struct bpf_sock_addr *ctx, __u8 family, const __u32 addr[4], __u16 port)
{
	if (family == FAMILY_V4) {
		ctx->user_ip4 = addr[0];
	} else {
		ctx->user_ip6[0] = addr[0];
		ctx->user_ip6[1] = addr[1];
		ctx->user_ip6[2] = addr[2];
		ctx->user_ip6[3] = addr[3];
	}
	ctx->user_port = bpf_htons(port);
}

static __always_inline int same_be(const struct be_val *a, const struct be_val *b)
{
	return a->port == b->port && a->addr[0] == b->addr[0] && a->addr[1] == b->addr[1] &&
	       a->addr[2] == b->addr[2] && a->addr[3] == b->addr[3];
}

/* pick returns the endpoint for a new connection to set id, honouring affinity. */
static __always_inline struct be_val *pick(struct bpf_sock_addr *ctx, __u32 id, const struct set_val *set)
{
	struct be_key bk = { .set_id = id };
	struct aff_key ak = {};
	struct be_val *be;
	__u64 now = 0;

	if (set->affinity_sec) {
		ak.netns = bpf_get_netns_cookie(ctx);
		ak.set_id = id;
		now = bpf_ktime_get_ns();
		struct aff_val *av = bpf_map_lookup_elem(&affinity, &ak);
		if (av && now - av->last_ns <= (__u64)set->affinity_sec * 1000000000ULL && av->slot < set->count) {
			/* The endpoint must still be in the set, in the slot remembered: a
			 * moved or removed endpoint falls back to a fresh choice. */
			bk.slot = av->slot;
			be = bpf_map_lookup_elem(&backends, &bk);
			if (be && same_be(be, &av->be)) {
				av->last_ns = now;
				return be;
			}
		}
	}
	bk.slot = bpf_get_prandom_u32() % set->count;
	be = bpf_map_lookup_elem(&backends, &bk);
	if (be && set->affinity_sec) {
		struct aff_val nv = { .last_ns = now, .be = *be, .slot = bk.slot };
		bpf_map_update_elem(&affinity, &ak, &nv, BPF_ANY);
	}
	return be;
}

/* translate rewrites a Service destination. It returns 1 to let the call go on
 * (translated or not ours) and 0 to fail it. */
static __always_inline int translate(struct bpf_sock_addr *ctx, __u8 family)
{
	struct fe_key fk = {};
	struct fe_val *fv;
	struct set_val *set;
	struct be_val *be;
	__u32 orig[4], out[4];
	int mapped;

	read_dst(ctx, family, orig);
	__builtin_memcpy(fk.addr, orig, sizeof(fk.addr));
	fk.family = family;
	/* An IPv6 socket reaching an IPv4 Service through its IPv4-mapped address
	 * (::ffff:a.b.c.d, as dual-stack applications do) is load-balanced as IPv4, and
	 * given the endpoint's IPv4-mapped address. */
	mapped = family == FAMILY_V6 && orig[0] == 0 && orig[1] == 0 && orig[2] == bpf_htonl(0xffff);
	if (mapped) {
		fk.addr[0] = orig[3];
		fk.addr[1] = 0;
		fk.addr[2] = 0;
		fk.addr[3] = 0;
		fk.family = FAMILY_V4;
	}
	fk.port = bpf_ntohs(ctx->user_port);
	fk.proto = ctx->protocol;
	fv = bpf_map_lookup_elem(&frontends, &fk);
	if (!fv)
		return 1;
	set = bpf_map_lookup_elem(&sets, &fv->set_id);
	if (!set)
		return 1;
	if (set->count == 0) {
		if (set->flags & SET_F_REJECT) {
			bpf_set_retval(-REJECT_ERRNO);
			return 0;
		}
		/* Endpoints exist but none this traffic may use (Local policy): leave the
		 * address alone so the packet meets the nftables rules, which drop it. */
		return 1;
	}
	be = pick(ctx, fv->set_id, set);
	if (!be)
		return 1;
	if (mapped) {
		out[0] = 0;
		out[1] = 0;
		out[2] = bpf_htonl(0xffff);
		out[3] = be->addr[0];
	} else {
		__builtin_memcpy(out, be->addr, sizeof(out));
	}

	/* Remembered as the socket will see it: its own family, the endpoint's address
	 * in the socket's form. */
	struct rev_key rk = { .cookie = bpf_get_socket_cookie(ctx), .port = be->port, .family = family };
	struct rev_val rv = { .port = fk.port };
	__builtin_memcpy(rk.addr, out, sizeof(rk.addr));
	__builtin_memcpy(rv.addr, orig, sizeof(rv.addr));
	bpf_map_update_elem(&revnat, &rk, &rv, BPF_ANY);

	write_dst(ctx, family, out, be->port);
	return 1;
}

/* untranslate shows the Service address instead of the endpoint's, for a socket
 * this program translated. It always returns 1: these hooks cannot fail a call. */
static __always_inline int untranslate(struct bpf_sock_addr *ctx, __u8 family)
{
	struct rev_key rk = { .cookie = bpf_get_socket_cookie(ctx), .family = family };
	struct rev_val *rv;

	read_dst(ctx, family, rk.addr);
	rk.port = bpf_ntohs(ctx->user_port);
	rv = bpf_map_lookup_elem(&revnat, &rk);
	if (rv)
		write_dst(ctx, family, rv->addr, rv->port);
	return 1;
}

SEC("cgroup/connect4")
int sock_connect4(struct bpf_sock_addr *ctx) { return translate(ctx, FAMILY_V4); }

SEC("cgroup/connect6")
int sock_connect6(struct bpf_sock_addr *ctx) { return translate(ctx, FAMILY_V6); }

SEC("cgroup/sendmsg4")
int sock_sendmsg4(struct bpf_sock_addr *ctx) { return translate(ctx, FAMILY_V4); }

SEC("cgroup/sendmsg6")
int sock_sendmsg6(struct bpf_sock_addr *ctx) { return translate(ctx, FAMILY_V6); }

SEC("cgroup/recvmsg4")
int sock_recvmsg4(struct bpf_sock_addr *ctx) { return untranslate(ctx, FAMILY_V4); }

SEC("cgroup/recvmsg6")
int sock_recvmsg6(struct bpf_sock_addr *ctx) { return untranslate(ctx, FAMILY_V6); }

SEC("cgroup/getpeername4")
int sock_getpeername4(struct bpf_sock_addr *ctx) { return untranslate(ctx, FAMILY_V4); }

SEC("cgroup/getpeername6")
int sock_getpeername6(struct bpf_sock_addr *ctx) { return untranslate(ctx, FAMILY_V6); }
