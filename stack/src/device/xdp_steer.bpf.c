/*
 * softrnic's XDP program: which frames arriving on an interface go to the RNIC's AF_XDP
 * sockets, and which stay with the kernel.
 *
 * The RNIC's stack owns IPv4 addresses of its own on the interface (`addrs`). An IPv4 frame
 * to one of them, and an ARP frame whose target is one of them (a request for the RNIC's
 * MAC or a reply to the RNIC's own request), goes to the XSK socket of the queue it arrived
 * on (`xsks`); every other frame passes to the kernel's network stack unchanged, so the host
 * keeps using the interface. With `config[0]` set the program takes every frame (the
 * interface's queues belong to the RNIC).
 *
 * Built by stack/build.rs with `clang -target bpf`; no headers, so that a C compiler for
 * BPF is all the build needs. Loaded by stack/src/device/xdp.rs.
 */

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

#define SEC(name) __attribute__((section(name), used))

/* The kernel's view of the frame (struct xdp_md of linux/bpf.h). */
struct xdp_md {
    u32 data;
    u32 data_end;
    u32 data_meta;
    u32 ingress_ifindex;
    u32 rx_queue_index;
    u32 egress_ifindex;
};

enum { XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT };
enum { MAP_HASH = 1, MAP_ARRAY = 2, MAP_XSKMAP = 17 };

/* A map as the "maps" section describes it (the loader creates it). */
struct map_def {
    u32 type;
    u32 key_size;
    u32 value_size;
    u32 max_entries;
    u32 map_flags;
};

/* Queue index -> the RNIC's XSK socket on that queue. */
struct map_def SEC("maps") xsks = {MAP_XSKMAP, 4, 4, 256, 0};
/* The RNIC's IPv4 addresses (network byte order) -> unused. */
struct map_def SEC("maps") addrs = {MAP_HASH, 4, 4, 64, 0};
/* [0]: nonzero = take every frame. */
struct map_def SEC("maps") config = {MAP_ARRAY, 4, 4, 1, 0};

static void *(*map_lookup)(void *map, const void *key) = (void *)1; /* bpf_map_lookup_elem */
static long (*redirect_map)(void *map, u64 key, u64 flags) = (void *)51; /* bpf_redirect_map */

/* To the queue's socket; XDP_PASS (the low bits of the flags) when it has none. */
static int to_rnic(struct xdp_md *ctx)
{
    return redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

/*
 * The decision for one frame. Only the first buffer of a multi-buffer frame is in
 * [data, data_end): the Ethernet, IPv4 and ARP headers read here always are.
 */
static __attribute__((always_inline)) int steer(struct xdp_md *ctx)
{
    u8 *data = (u8 *)(long)ctx->data;
    u8 *end = (u8 *)(long)ctx->data_end;
    u32 zero = 0;
    u32 *all = map_lookup(&config, &zero);
    u32 key;

    if (all && *all)
        return to_rnic(ctx);
    if (data + 14 > end)
        return XDP_PASS;
    if (data[12] == 0x08 && data[13] == 0x00) {
        /* IPv4: the destination address (Ethernet 14 + IPv4 offset 16). */
        if (data + 34 > end)
            return XDP_PASS;
        __builtin_memcpy(&key, data + 30, 4);
    } else if (data[12] == 0x08 && data[13] == 0x06) {
        /* ARP for IPv4 over Ethernet: the target protocol address (14 + 24). */
        if (data + 42 > end)
            return XDP_PASS;
        __builtin_memcpy(&key, data + 38, 4);
    } else {
        return XDP_PASS;
    }
    if (!map_lookup(&addrs, &key))
        return XDP_PASS;
    return to_rnic(ctx);
}

/*
 * Multi-buffer aware (BPF_F_XDP_HAS_FRAGS): frames larger than a page (jumbo frames) reach
 * the program whole, as several buffers, and an AF_XDP socket bound with XDP_USE_SG receives
 * them as a chain of UMEM frames. The loader falls back to softrnic_steer_linear on kernels
 * without multi-buffer XDP (before 5.18).
 */
SEC("xdp.frags")
int softrnic_steer(struct xdp_md *ctx)
{
    return steer(ctx);
}

/* The same program for frames that fit one buffer. */
SEC("xdp")
int softrnic_steer_linear(struct xdp_md *ctx)
{
    return steer(ctx);
}

/* The project's licence; the program uses no GPL-only helper. */
char _license[] SEC("license") = "MIT OR Apache-2.0";
