#!/usr/bin/env python3
"""MPA (RFC 5044 + RFC 6581) helpers for the softrnic interop lab.

Standard library only, so it runs on the host as well as inside the guest.

Sub-commands:
  pcap FILE            list the MPA Request/Reply frames found at the start of each TCP
                       stream in a pcap (one JSON object per line)
  expect-pcap FILE     assert that a pcap holds an MPA exchange (options below)
  listen               TCP responder stand-in: record the MPA Request a peer sends, answer
                       with an MPA Reply (reject by default), close
  connect              TCP initiator stand-in: send an MPA Request, read the MPA Reply,
                       check it, close without sending anything else

Frame layout (RFC 5044 §7.1, RFC 6581 §5/§7):
  16-byte key | flags M C R H(res) | rev | PD length (16 bit) | private data
  With rev 2 and H set, the first 4 private-data bytes are the IRD/ORD words:
  IRD word: P2P 0x8000, zero-length Send RTR 0x4000, IRD value 0x3fff
  ORD word: zero-length Write RTR 0x8000, zero-length Read RTR 0x4000, ORD value 0x3fff
"""

import argparse
import json
import socket
import struct
import sys
import time

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
FLAG_M, FLAG_C, FLAG_R, FLAG_H = 0x80, 0x40, 0x20, 0x10
IRD_P2P, IRD_RTR_SEND = 0x8000, 0x4000
ORD_RTR_WRITE, ORD_RTR_READ = 0x8000, 0x4000
IRD_ORD_MASK = 0x3FFF


# --------------------------------------------------------------------------- frames
def build_frame(key, rev, marker=False, crc=False, reject=False, enhanced=True,
                ird=None, ord_=None, p2p=False, rtr_send=False, rtr_write=False,
                rtr_read=False, extra=b""):
    flags = (FLAG_M if marker else 0) | (FLAG_C if crc else 0) | (FLAG_R if reject else 0)
    pd = b""
    if enhanced and rev >= 2:
        flags |= FLAG_H
        ird_w = ((ird or 0) & IRD_ORD_MASK) | (IRD_P2P if p2p else 0) | (IRD_RTR_SEND if rtr_send else 0)
        ord_w = ((ord_ or 0) & IRD_ORD_MASK) | (ORD_RTR_WRITE if rtr_write else 0) | (ORD_RTR_READ if rtr_read else 0)
        pd = struct.pack(">HH", ird_w, ord_w)
    pd += extra
    return key + struct.pack(">BBH", flags, rev, len(pd)) + pd


def parse_frame(data):
    """Parse one MPA Request/Reply from the start of `data`; None if incomplete/not MPA."""
    if len(data) < 20 or data[:16] not in (KEY_REQ, KEY_REP):
        return None
    flags, rev, pdlen = struct.unpack(">BBH", data[16:20])
    if len(data) < 20 + pdlen:
        return None
    pd = data[20:20 + pdlen]
    info = {
        "kind": "request" if data[:16] == KEY_REQ else "reply",
        "hex": data[:20 + pdlen].hex(),
        "M": bool(flags & FLAG_M), "C": bool(flags & FLAG_C),
        "R": bool(flags & FLAG_R), "H": bool(flags & FLAG_H),
        "reserved_flags": flags & 0x0F, "rev": rev, "pd_len": pdlen,
    }
    if rev >= 2 and info["H"] and pdlen >= 4:
        ird_w, ord_w = struct.unpack(">HH", pd[:4])
        info.update({
            "ird": ird_w & IRD_ORD_MASK, "ord": ord_w & IRD_ORD_MASK,
            "p2p": bool(ird_w & IRD_P2P), "rtr_send": bool(ird_w & IRD_RTR_SEND),
            "rtr_write": bool(ord_w & ORD_RTR_WRITE), "rtr_read": bool(ord_w & ORD_RTR_READ),
        })
    return info


# --------------------------------------------------------------------------- pcap
def read_pcap(path):
    """Yield (timestamp, linktype, frame bytes) from a classic pcap file."""
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            raise ValueError(f"{path}: not a pcap file (short header)")
        magic = hdr[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            end = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            end = ">"
        else:
            raise ValueError(f"{path}: not a classic pcap file (pcapng is not supported)")
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        linktype = struct.unpack(end + "I", hdr[20:24])[0] & 0x0FFFFFFF
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, _orig = struct.unpack(end + "IIII", rec)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec + frac / (1e9 if nano else 1e6), linktype, data


def tcp_segments(path):
    """Yield (ts, src, sport, dst, dport, flags, seq, payload) for TCP over IPv4/IPv6."""
    for ts, linktype, frame in read_pcap(path):
        if linktype == 1:  # Ethernet
            off = 12
            etype = struct.unpack(">H", frame[off:off + 2])[0] if len(frame) >= 14 else 0
            off += 2
            while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
                etype = struct.unpack(">H", frame[off + 2:off + 4])[0]
                off += 4
        elif linktype == 113:  # Linux cooked
            if len(frame) < 16:
                continue
            etype, off = struct.unpack(">H", frame[14:16])[0], 16
        elif linktype == 101:  # raw IP
            etype, off = (0x0800 if frame[:1] and frame[0] >> 4 == 4 else 0x86DD), 0
        else:
            continue
        ip = frame[off:]
        if etype == 0x0800 and len(ip) >= 20:
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack(">H", ip[2:4])[0]
            if ip[9] != 6 or len(ip) < ihl:
                continue
            src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            tcp = ip[ihl:max(ihl, min(total, len(ip)))]
        elif etype == 0x86DD and len(ip) >= 40:
            if ip[6] != 6:
                continue
            plen = struct.unpack(">H", ip[4:6])[0]
            src = socket.inet_ntop(socket.AF_INET6, ip[8:24])
            dst = socket.inet_ntop(socket.AF_INET6, ip[24:40])
            tcp = ip[40:40 + plen]
        else:
            continue
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        yield ts, src, sport, dst, dport, tcp[13], seq, tcp[doff:]


def mpa_frames(path):
    """Reassemble the first bytes of every TCP stream direction and return the MPA frames."""
    streams = {}  # (src, sport, dst, dport, conn#) -> dict
    conn_no = {}
    for ts, src, sport, dst, dport, flags, seq, payload in tcp_segments(path):
        key4 = (src, sport, dst, dport)
        if flags & 0x02:  # SYN starts a new connection in this direction
            conn_no[key4] = conn_no.get(key4, 0) + 1
            streams[key4 + (conn_no[key4],)] = {"isn": seq, "chunks": {}, "ts": None}
            continue
        st = streams.get(key4 + (conn_no.get(key4, 0),))
        if st is None or not payload:
            continue
        rel = (seq - st["isn"] - 1) & 0xFFFFFFFF
        if rel > 1 << 20:
            continue
        if st["ts"] is None:
            st["ts"] = ts
        st["chunks"].setdefault(rel, payload)
    out = []
    for (src, sport, dst, dport, _n), st in streams.items():
        data = b""
        for rel in sorted(st["chunks"]):
            chunk = st["chunks"][rel]
            if rel > len(data):
                break  # hole
            data += chunk[len(data) - rel:]
            if len(data) >= 20 + 0xFFFF:
                break
        info = parse_frame(data)
        if info:
            info.update({"ts": st["ts"], "src": f"{src}:{sport}", "dst": f"{dst}:{dport}"})
            out.append(info)
    out.sort(key=lambda i: i["ts"])
    return out


# --------------------------------------------------------------------------- checks
class CheckFailed(Exception):
    pass


def check_fields(info, expect, what):
    """expect: dict field -> wanted value; raises CheckFailed listing every mismatch."""
    bad = [f"{k}={info.get(k)!r} (want {v!r})" for k, v in expect.items() if info.get(k) != v]
    if bad:
        raise CheckFailed(f"{what}: " + ", ".join(bad) + f"; frame {info.get('hex')}")


def recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise CheckFailed(f"peer closed the connection after {len(buf)} of {n} bytes ({buf.hex()})")
        buf += chunk
    return buf


def recv_mpa(sock, deadline):
    head = recv_exact(sock, 20, deadline)
    if head[:16] not in (KEY_REQ, KEY_REP):
        raise CheckFailed(f"not an MPA Request/Reply: {head.hex()}")
    pdlen = struct.unpack(">H", head[18:20])[0]
    return parse_frame(head + recv_exact(sock, pdlen, deadline))


def log(msg):
    print(f"[mpa_lab {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")


# --------------------------------------------------------------------------- commands
def cmd_pcap(args):
    for info in mpa_frames(args.file):
        print(json.dumps(info, sort_keys=True))
    return 0


def cmd_expect_pcap(args):
    frames = mpa_frames(args.file)
    reqs = [f for f in frames if f["kind"] == "request"]
    reps = [f for f in frames if f["kind"] == "reply"]
    for f in frames:
        log(f"{f['kind']:7s} {f['src']} -> {f['dst']}: {f['hex']}")
    if len(reqs) < args.min_requests:
        raise CheckFailed(f"{args.file}: {len(reqs)} MPA Request(s), want at least {args.min_requests}")
    if len(reps) < args.min_replies:
        raise CheckFailed(f"{args.file}: {len(reps)} MPA Reply(s), want at least {args.min_replies}")
    if args.request_hex:
        want = args.request_hex.replace(" ", "").lower()
        got = [r["hex"] for r in reqs if args.request_from is None or r["src"].split(":")[0] == args.request_from]
        if not got:
            raise CheckFailed(f"no MPA Request from {args.request_from}")
        if any(g != want for g in got):
            raise CheckFailed(f"MPA Request bytes {got} differ from the expected {want}")
    log(f"pcap OK: {len(reqs)} request(s), {len(reps)} reply(s)")
    return 0


def cmd_listen(args):
    """Responder stand-in: accept, record the MPA Request, send a Reply, close."""
    want = args.expect_request_hex.replace(" ", "").lower() if args.expect_request_hex else None
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(4)
    log(f"listening on {args.bind}:{args.port}")
    deadline = time.monotonic() + args.timeout
    results = []
    try:
        for n in range(args.count):
            srv.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                conn, peer = srv.accept()
            except TimeoutError:
                raise CheckFailed(f"no connection within {args.timeout}s (got {n} of {args.count})") from None
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                req = recv_mpa(conn, deadline)
                log(f"MPA Request from {peer[0]}:{peer[1]}: {req['hex']}")
                results.append({"peer": f"{peer[0]}:{peer[1]}", "request": req})
                if req["kind"] != "request":
                    raise CheckFailed("first frame is an MPA Reply, not a Request")
                rev = min(req["rev"], 2)
                reply = build_frame(KEY_REP, rev, crc=req["C"], reject=not args.accept,
                                    enhanced=req["H"] and rev >= 2, ird=args.ird, ord_=args.ord)
                conn.sendall(reply)
                log(f"sent MPA Reply ({'accept' if args.accept else 'reject'}): {reply.hex()}")
                time.sleep(args.linger)
        write_json(args.out, results)
        if want:
            for r in results:
                if r["request"]["hex"] != want:
                    raise CheckFailed(f"MPA Request {r['request']['hex']} != expected {want}")
            log("MPA Request bytes match the expected bytes")
        return 0
    finally:
        srv.close()


def cmd_connect(args):
    """Initiator stand-in: connect (retrying while refused), send Request, check Reply, close."""
    deadline = time.monotonic() + args.timeout
    results = []
    for n in range(args.count):
        crc = args.crc[n % len(args.crc)] == "1"
        sock = None
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(2)
            try:
                sock.connect((args.host, args.port))
                break
            except (TimeoutError, ConnectionRefusedError, OSError) as e:
                sock.close()
                if time.monotonic() > deadline:
                    raise CheckFailed(f"could not connect to {args.host}:{args.port}: {e}") from e
                time.sleep(0.5)
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            req = build_frame(KEY_REQ, args.rev, crc=crc, enhanced=args.rev >= 2,
                              ird=args.ird, ord_=args.ord)
            sock.sendall(req)
            log(f"connection {n + 1}: sent MPA Request {req.hex()}")
            # RFC 5044 §7.1.1 / siw 6.1 accept race: send nothing more until the Reply is in.
            rep = recv_mpa(sock, deadline)
            log(f"connection {n + 1}: MPA Reply {rep['hex']}")
            results.append({"request": parse_frame(req), "reply": rep})
            check_fields(rep, {"kind": "reply", "rev": args.rev, "R": False, "M": False, "C": crc,
                               "reserved_flags": 0}, f"connection {n + 1} MPA Reply")
            if args.rev >= 2:
                check_fields(rep, {"H": True}, f"connection {n + 1} MPA Reply (RFC 6581 H bit)")
                if rep.get("ird") is None:
                    raise CheckFailed(f"connection {n + 1}: rev 2 Reply without IRD/ORD words")
                if args.expect_ird is not None:
                    check_fields(rep, {"ird": args.expect_ird}, f"connection {n + 1} IRD")
                if args.expect_ord is not None:
                    check_fields(rep, {"ord": args.expect_ord}, f"connection {n + 1} ORD")
            time.sleep(args.linger)
    write_json(args.out, results)
    log(f"{args.count} MPA exchange(s) checked")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("pcap", help="list MPA frames in a pcap")
    s.add_argument("file")
    s.set_defaults(fn=cmd_pcap)

    s = sub.add_parser("expect-pcap", help="assert the pcap holds an MPA exchange")
    s.add_argument("file")
    s.add_argument("--min-requests", type=int, default=1)
    s.add_argument("--min-replies", type=int, default=1)
    s.add_argument("--request-hex", help="every (matching) MPA Request must be exactly these bytes")
    s.add_argument("--request-from", help="only compare requests sent from this IP")
    s.set_defaults(fn=cmd_expect_pcap)

    s = sub.add_parser("listen", help="record MPA Requests, answer with a Reply")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, default=7174)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--timeout", type=float, default=120)
    s.add_argument("--accept", action="store_true", help="accept instead of reject (R=0)")
    s.add_argument("--ird", type=int, default=0)
    s.add_argument("--ord", type=int, default=0)
    s.add_argument("--linger", type=float, default=0.5, help="seconds to keep the socket open after the Reply")
    s.add_argument("--expect-request-hex")
    s.add_argument("--out", help="write the recorded frames as JSON here")
    s.set_defaults(fn=cmd_listen)

    s = sub.add_parser("connect", help="send MPA Requests, check the Replies")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, default=7174)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--rev", type=int, default=2)
    s.add_argument("--crc", default="0", help="per-connection C bit, comma list of 0/1 (cycled)")
    s.add_argument("--ird", type=int, default=16)
    s.add_argument("--ord", type=int, default=16)
    s.add_argument("--expect-ird", type=int)
    s.add_argument("--expect-ord", type=int)
    s.add_argument("--timeout", type=float, default=120)
    s.add_argument("--linger", type=float, default=0.5, help="seconds to wait after the Reply before closing")
    s.add_argument("--out", help="write the exchanged frames as JSON here")
    s.set_defaults(fn=cmd_connect)

    args = p.parse_args(argv)
    if getattr(args, "crc", None) is not None and isinstance(args.crc, str):
        args.crc = [c.strip() for c in args.crc.split(",") if c.strip()] or ["0"]
    try:
        return args.fn(args)
    except CheckFailed as e:
        log(f"FAIL: {e}")
        return 1
    except (OSError, ValueError) as e:
        log(f"ERROR: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
