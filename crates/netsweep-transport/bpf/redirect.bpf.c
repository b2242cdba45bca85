// SPDX-License-Identifier: MIT OR Apache-2.0
// The XDP program of netsweep's `xdp` transport: frames of netsweep's EtherType (0x88B5) go to
// the AF_XDP socket bound to the queue they arrived on; every other frame passes to the
// kernel's stack untouched. netsweep loads it on the lab interface and removes it on exit.
// Built by build.rs with clang (`--features xdp`); loaded with aya.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NETSWEEP_ETHERTYPE 0x88B5

// Queue index -> AF_XDP socket. 64 queues cover the interfaces a lab host has.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} netsweep_xsks SEC(".maps");

SEC("xdp")
int netsweep_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(NETSWEEP_ETHERTYPE))
		return XDP_PASS;
	// No socket on this queue: the frame passes to the stack (which drops the unknown
	// EtherType) rather than vanishing here.
	return bpf_redirect_map(&netsweep_xsks, ctx->rx_queue_index, XDP_PASS);
}

// The kernel asks for a GPL-compatible licence string; the file itself is MIT OR Apache-2.0.
char LICENSE[] SEC("license") = "Dual MIT/GPL";
