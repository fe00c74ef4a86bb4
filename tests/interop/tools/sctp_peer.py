#!/usr/bin/env python3
"""Guest-side SCTP peer for the interop lab: Linux kernel SCTP, one-to-one style sockets.

Runs as server (one association, then exits) or client, sends and/or receives a verifiable
pattern, and prints one JSON summary line on stdout (human-readable progress on stderr).
Only the Python standard library of Debian's python3-minimal is used (socket.IPPROTO_SCTP).

    sctp_peer.py server [--bind ADDR] --port P  (--send | --recv | --bidir) -n BYTES [options]
    sctp_peer.py client --connect ADDR --port P (--send | --recv | --bidir) -n BYTES [options]

Options:
    -l LEN            message length (default 1024; the last message may be shorter)
    --streams N       send round-robin over streams 0..N-1 (default 1)
    --unordered       send with the U flag (SCTP_UNORDERED)
    --ppid N          payload protocol identifier of sent messages (default 0)
    --verify          check every received message against the pattern; exit 1 on a mismatch
    --pattern KIND    msgseq (default) or offset, see below
    --udp             RFC 6951 UDP encapsulation: sets net.sctp.udp_port and
                      net.sctp.encap_port to --udp-port (default 9899) before the socket opens
    --ready FILE      create FILE once the server listens (a lab flag for the other side)
    --started FILE    create FILE once the association is up (both roles)
    --rate B          send at most B bytes per second (default: as fast as possible)
    --timeout S       give up after S seconds without progress (default 60)
    --out FILE        also write the JSON summary to FILE

With --proto sprf the peer speaks the in-band test protocol of `softrnic sctp-perf` (see
cli/src/sctp_perf.rs): the client sends PARAMS (stream 0, PPID "SPRF"), data messages carry
stream (u16) | 0 (u16) | per-stream sequence (u64) | pattern bytes with PPID "SPRD", the sender
ends with FIN (messages per stream), the receiver answers REPORT (bytes, messages, errors) once
every announced message arrived; the client shuts the association down at the end. As server
it takes -n/-t/-l/--streams/--unordered/--verify/--reverse/--bidir from the client's PARAMS; as
client it sends them (--send: client sends, --recv: reverse, --bidir: both).

Patterns of --proto plain (the receiver checks each user message on its own, so several streams
and unordered delivery do not matter):
    msgseq  message k of a direction (k = 0, 1, ... in sending order) is 8 bytes of k
            (unsigned, big-endian) followed by bytes (k + j) mod 256 for positions j >= 8 of the
            message; at the end the receiver checks that it got each k exactly once and
            0..count-1 without a hole. Messages of fewer than 8 bytes hold the first bytes of k.
    offset  byte i of the direction's data (counted over all messages in order) is i mod 251
            (single stream, ordered delivery only).

Ending: a side stops receiving after -n BYTES (both sides are given the same -n), or with
-n 0 when the peer shuts the association down; a side that only sends waits for the peer to
close first, so every byte is acknowledged before the association shuts down (SCTP has no
half-close: RFC 9260 §9.2). `-t SECS` sends for that long instead of -n bytes (--send only).

Exit status: 0 ok, 1 data missing, duplicated or not matching the pattern, 2 setup failure.
"""

import argparse
import os
import socket
import struct
import sys
import threading
import time

IPPROTO_SCTP = getattr(socket, "IPPROTO_SCTP", 132)
SCTP_NODELAY = 3  # linux/sctp.h
SCTP_EVENTS = 11  # struct sctp_event_subscribe; first field: sctp_data_io_event
SCTP_SNDRCV = 1  # cmsg type carrying struct sctp_sndrcvinfo
SCTP_UNORDERED = 1  # sinfo_flags
SNDRCV = struct.Struct("@HHHIIIIIi")  # stream ssn flags ppid context ttl tsn cumtsn assoc_id

# softrnic sctp-perf test protocol.
SPRF_MAGIC = b"SPRF"
PPID_CONTROL = 0x53505246
PPID_DATA = 0x53505244
SPRF_HDR = 12


def to_json(d):
    """One JSON object line (python3-minimal has no json module)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + ", ".join(f'"{k}": {val(v)}' for k, v in d.items()) + "}"


def log(msg):
    print(f"[sctp_peer {time.monotonic():.3f}] {msg}", file=sys.stderr, flush=True)


def message(kind, k, offset, length):
    """Payload of message k (msgseq) or of the bytes at `offset` (offset pattern)."""
    if kind == "offset":
        return bytes((offset + j) % 251 for j in range(length))
    head = k.to_bytes(8, "big")[:length]
    return head + bytes((k + j) % 256 for j in range(len(head), length))


def set_udp_encapsulation(port):
    """RFC 6951 in the kernel: listen on UDP `port` and encapsulate towards `port`."""
    for name in ("udp_port", "encap_port"):
        with open(f"/proc/sys/net/sctp/{name}", "w") as f:
            f.write(f"{port}\n")
    log(f"net.sctp.udp_port = net.sctp.encap_port = {port}")


class Receiver:
    def __init__(self, args):
        self.args = args
        self.bytes = 0
        self.messages = 0
        self.bad = 0
        self.seen = set()
        self.dups = 0
        self.first_bad = None

    def check(self, msg):
        a = self.args
        if a.verify:
            if a.pattern == "offset":
                want = message("offset", 0, self.bytes, len(msg))
                k = self.messages
            else:
                k = int.from_bytes(msg[:8], "big") if len(msg) >= 8 else self.messages
                want = message("msgseq", k, 0, len(msg))
                if k in self.seen:
                    self.dups += 1
                self.seen.add(k)
            if msg != want:
                self.bad += 1
                if self.first_bad is None:
                    at = next(i for i in range(len(msg)) if msg[i] != want[i]) if len(msg) == len(want) else 0
                    self.first_bad = f"message {self.messages} (k={k}, {len(msg)} bytes): first difference at byte {at}"
                    log("MISMATCH " + self.first_bad)
        self.bytes += len(msg)
        self.messages += 1

    def run(self, sock):
        buf = bytearray()
        while self.args.n == 0 or self.bytes < self.args.n:
            try:
                data, _anc, flags, _addr = sock.recvmsg(1 << 16)
            except TimeoutError:
                log(f"receive timed out after {self.bytes} of {self.args.n} bytes")
                return
            if not data:
                if self.args.n:
                    log(f"peer closed after {self.bytes} of {self.args.n} bytes")
                break
            buf += data
            if flags & socket.MSG_EOR:
                self.check(bytes(buf))
                buf.clear()
        log(f"received {self.bytes} bytes in {self.messages} messages")

    def ok(self):
        if (self.args.n and self.bytes != self.args.n) or self.bad or self.dups or not self.messages:
            return False
        if self.args.verify and self.args.pattern == "msgseq":
            return self.seen == set(range(self.messages))
        return True

    def summary(self):
        s = {"recv_bytes": self.bytes, "recv_messages": self.messages, "mismatches": self.bad}
        if self.args.verify and self.args.pattern == "msgseq":
            s["duplicates"] = self.dups
            s["missing"] = len(set(range(self.messages)) - self.seen)
        if self.first_bad:
            s["first_mismatch"] = self.first_bad
        return s


def send_all(sock, args, stats):
    k = 0
    offset = 0
    t0 = time.monotonic()
    while (time.monotonic() - t0 < args.t) if args.t else (offset < args.n):
        if args.rate:
            ahead = offset / args.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        length = args.l if args.t else min(args.l, args.n - offset)
        payload = message(args.pattern, k, offset, length)
        stream = k % args.streams
        if args.streams > 1 or args.unordered or args.ppid:
            info = struct.pack(
                "@HHHIIIIIi", stream, 0, SCTP_UNORDERED if args.unordered else 0,
                socket.htonl(args.ppid), 0, 0, 0, 0, 0)
            sock.sendmsg([payload], [(IPPROTO_SCTP, SCTP_SNDRCV, info)])
        else:
            sock.sendall(payload)
        offset += length
        k += 1
    stats["sent_bytes"] = offset
    stats["sent_messages"] = k
    log(f"sent {offset} bytes in {k} messages")


def send_msg(sock, payload, stream=0, ppid=0, unordered=False):
    info = SNDRCV.pack(stream, 0, SCTP_UNORDERED if unordered else 0, socket.htonl(ppid), 0, 0, 0, 0, 0)
    sock.sendmsg([payload], [(IPPROTO_SCTP, SCTP_SNDRCV, info)])


def recv_msg(sock):
    """One whole user message: (data, stream, ppid, unordered); data b'' when the peer closed."""
    buf = bytearray()
    stream = ppid = 0
    unordered = False
    first = True
    while True:
        data, anc, flags, _addr = sock.recvmsg(1 << 16, 256)
        if not data and not anc:
            return b"", 0, 0, False
        for level, kind, val in anc:
            if first and level == IPPROTO_SCTP and kind == SCTP_SNDRCV and len(val) >= SNDRCV.size:
                st, _ssn, fl, pp = SNDRCV.unpack(val[:SNDRCV.size])[:4]
                stream, ppid, unordered = st, socket.ntohl(pp), bool(fl & SCTP_UNORDERED)
                first = False
        buf += data
        if flags & socket.MSG_EOR:
            return bytes(buf), stream, ppid, unordered


_PATTERNS = {}


def sprf_pattern(stream, seq, n):
    """sctp-perf's pattern bytes after the header: byte i is
    (seq * 0x9E3779B9 + stream * 131 + i * 7) XOR (i >> 8), low 8 bits."""
    base = (seq * 0x9E3779B9 + stream * 131) & 0xFF
    key = (base, n)
    p = _PATTERNS.get(key)
    if p is None:
        p = bytes(((base + i * 7) ^ (i >> 8)) & 0xFF for i in range(n))
        if len(_PATTERNS) < 1024:
            _PATTERNS[key] = p
    return p


def sprf_control(kind, body):
    return SPRF_MAGIC + bytes([1, kind, 0, 0]) + body


class Sprf:
    """One association running sctp-perf's test protocol."""

    def __init__(self, sock, server, args):
        self.sock = sock
        self.server = server
        self.a = args
        self.lock = threading.Lock()
        self.params = None
        self.rx_bytes = self.rx_msgs = self.errors = 0
        self.counts = {}
        self.next_seq = {}
        self.seen = {}
        self.fin = None
        self.rx_done = False
        self.peer_report = None
        self.tx_bytes = self.tx_msgs = 0
        self.tx_done = False
        self.first_error = None

    def error(self, text):
        self.errors += 1
        if self.first_error is None:
            self.first_error = text
        if self.errors <= 10:
            log("verify: " + text)

    def encode_params(self):
        a = self.a
        flags = int(a.verify) | int(a.recv) << 1 | int(a.bidir) << 2 | int(a.unordered) << 3
        return (SPRF_MAGIC + bytes([1, 1, flags, 0]) + struct.pack(">H2xIQQ", a.streams, max(a.l, SPRF_HDR),
                                                               0 if a.t else a.n, int(a.t * 1000)))

    def on_control(self, b):
        if len(b) < 8 or b[:4] != SPRF_MAGIC:
            self.error("malformed control message")
            return
        kind = b[5]
        if kind == 1 and len(b) >= 32:
            flags = b[6]
            streams, length, nbytes, ms = struct.unpack(">H2xIQQ", b[8:32])
            self.params = {"verify": bool(flags & 1), "reverse": bool(flags & 2), "bidir": bool(flags & 4),
                           "unordered": bool(flags & 8), "streams": streams, "len": length,
                           "bytes": nbytes, "ms": ms}
            log(f"PARAMS {self.params}")
        elif kind == 2:
            n = struct.unpack(">H", b[8:10])[0]
            total = struct.unpack(">Q", b[12:20])[0]
            per = [struct.unpack(">Q", b[20 + 8 * i:28 + 8 * i])[0] for i in range(n)]
            self.fin = (total, per)
            log(f"FIN from the peer: {total} bytes, per stream {per}")
        elif kind == 3:
            self.peer_report = struct.unpack(">QQQ", b[8:32])
            log(f"REPORT from the peer: bytes, messages, errors = {self.peer_report}")
        self.check_complete()

    def on_data(self, m, stream, unordered):
        p = self.params or {}
        self.rx_bytes += len(m)
        self.rx_msgs += 1
        self.counts[stream] = self.counts.get(stream, 0) + 1
        if p.get("verify", self.a.verify):
            if len(m) < SPRF_HDR:
                self.error(f"message of {len(m)} bytes is shorter than the header")
            else:
                st, seq = struct.unpack(">H2xQ", m[:SPRF_HDR])
                if st != stream:
                    self.error(f"message seq {seq} names stream {st} but arrived on stream {stream}")
                elif m[SPRF_HDR:] != sprf_pattern(st, seq, len(m) - SPRF_HDR):
                    self.error(f"stream {st} seq {seq}: pattern mismatch")
                elif unordered or p.get("unordered"):
                    seen = self.seen.setdefault(st, set())
                    if seq in seen:
                        self.error(f"stream {st} seq {seq} delivered twice")
                    seen.add(seq)
                else:
                    exp = self.next_seq.get(st, 0)
                    self.next_seq[st] = seq + 1
                    if seq != exp:
                        self.error(f"stream {st}: seq {seq} delivered where {exp} was due (ordered)")
        if self.fin:
            self.check_complete()

    def check_complete(self):
        if self.rx_done or self.fin is None:
            return
        _total, per = self.fin
        if any(self.counts.get(s, 0) < n for s, n in enumerate(per)):
            return
        if any(c > (per[s] if s < len(per) else 0) for s, c in self.counts.items()):
            self.error("more messages arrived than the sender sent")
        for s, seen in self.seen.items():
            n = per[s] if s < len(per) else 0
            if seen != set(range(n)):
                self.error(f"stream {s}: messages missing")
        self.rx_done = True
        send_msg(self.sock, sprf_control(3, struct.pack(">QQQ", self.rx_bytes, self.rx_msgs, self.errors)),
                 0, PPID_CONTROL)
        log(f"received {self.rx_bytes} bytes in {self.rx_msgs} messages, {self.errors} errors: REPORT sent")

    def tx(self, p):
        length = max(p["len"], SPRF_HDR)
        streams = max(p["streams"], 1)
        per = [0] * streams
        t0 = time.monotonic()
        i = 0
        try:
            while (self.tx_bytes < p["bytes"]) if p["bytes"] else (time.monotonic() - t0 < p["ms"] / 1000):
                if self.a.rate:
                    ahead = self.tx_bytes / self.a.rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
                st = i % streams
                seq = per[st]
                body = sprf_pattern(st, seq, length - SPRF_HDR) if p["verify"] else bytes(length - SPRF_HDR)
                send_msg(self.sock, struct.pack(">H2xQ", st, seq) + body, st, PPID_DATA, p["unordered"])
                per[st] += 1
                i += 1
                self.tx_bytes += length
                self.tx_msgs += 1
            fin = struct.pack(">H2xQ", streams, self.tx_bytes) + b"".join(struct.pack(">Q", c) for c in per)
            send_msg(self.sock, sprf_control(2, fin), 0, PPID_CONTROL)
            log(f"sent {self.tx_bytes} bytes in {self.tx_msgs} messages: FIN sent")
        except OSError as e:
            log(f"send failed: {e}")
            self.errors += 1
        self.tx_done = True

    def run(self):
        """Runs the test; returns (ok, summary dict)."""
        if not self.server:
            send_msg(self.sock, self.encode_params(), 0, PPID_CONTROL)
            self.on_control(self.encode_params())
        early = []
        while self.params is None:
            m, st, ppid, un = recv_msg(self.sock)
            if not m:
                return False, {"error": "association closed before PARAMS"}
            if ppid == PPID_CONTROL:
                self.on_control(m)
            elif ppid == PPID_DATA:
                early.append((m, st, un))
        p = self.params
        sends = (p["reverse"] or p["bidir"]) if self.server else (not p["reverse"] or p["bidir"])
        receives = (not p["reverse"] or p["bidir"]) if self.server else (p["reverse"] or p["bidir"])
        for m, st, un in early:
            self.on_data(m, st, un)
        t = None
        if sends:
            t = threading.Thread(target=self.tx, args=(p,))
            t.start()
        else:
            self.tx_done = True
        closed = False
        while True:
            # A REPORT only follows our FIN, so the sender thread is finishing (joined below).
            if (not sends or self.peer_report) and (not receives or self.rx_done):
                break
            try:
                m, st, ppid, un = recv_msg(self.sock)
            except TimeoutError:
                log("timed out waiting for the peer")
                break
            if not m:
                closed = True
                break
            if ppid == PPID_CONTROL:
                self.on_control(m)
            elif ppid == PPID_DATA:
                self.on_data(m, st, un)
        if t:
            t.join()
        if self.server and not closed:
            # The client ends the association once it has everything.
            try:
                while recv_msg(self.sock)[0]:
                    pass
            except OSError:
                pass
        ok = self.errors == 0
        summary = {"proto": "sprf", "sent_bytes": self.tx_bytes, "sent_messages": self.tx_msgs,
                   "recv_bytes": self.rx_bytes, "recv_messages": self.rx_msgs, "errors": self.errors}
        if sends:
            if self.peer_report is None:
                ok = False
                summary["error"] = "no REPORT from the receiver"
            else:
                rb, rm, re_ = self.peer_report
                summary["peer_report"] = f"{rb} bytes, {rm} messages, {re_} errors"
                ok = ok and re_ == 0 and rb == self.tx_bytes
        if receives:
            if not self.rx_done:
                ok = False
                summary["error"] = "the transfer ended before every message the FIN announced arrived"
            elif self.fin and self.rx_bytes != self.fin[0]:
                ok = False
        if self.first_error:
            summary["first_error"] = self.first_error
        return ok, summary


def graceful_close(sock):
    """Closes an SCTP socket after its SHUTDOWN handshake (RFC 9260 §9.2), waiting up to 5 s:
    with SO_LINGER set, the kernel's close() blocks until SHUTDOWN COMPLETE arrives. Without
    it close() returns at once and a guest that powers off next may never send the SHUTDOWN,
    leaving the peer waiting for the association to end."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 5))
    except OSError:
        pass
    sock.close()


def report(stats, ok, t0, out):
    """Prints the run's JSON line (with its seconds and verdict), also to OUT when given; the
    exit status: 0 when the run was ok."""
    stats["seconds"] = round(time.monotonic() - t0, 3)
    stats["ok"] = ok
    line = to_json(stats)
    print(line, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(line + "\n")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--connect")
    p.add_argument("--port", type=int, required=True)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--send", action="store_true")
    mode.add_argument("--recv", action="store_true")
    mode.add_argument("--bidir", action="store_true")
    p.add_argument("-n", type=int, required=True)
    p.add_argument("-t", type=float, default=0)
    p.add_argument("-l", type=int, default=1024)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--unordered", action="store_true")
    p.add_argument("--ppid", type=int, default=0)
    p.add_argument("--verify", action="store_true")
    p.add_argument("--pattern", choices=["msgseq", "offset"], default="msgseq")
    p.add_argument("--proto", choices=["plain", "sprf"], default="plain")
    p.add_argument("--udp", action="store_true")
    p.add_argument("--udp-port", type=int, default=9899)
    p.add_argument("--ready")
    p.add_argument("--started")
    p.add_argument("--rate", type=float, default=0)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--out")
    args = p.parse_args()
    if args.role == "client" and not args.connect:
        p.error("client needs --connect ADDR")
    if args.l < 1 or args.streams < 1:
        p.error("-l and --streams must be at least 1")
    if args.t and not args.send:
        p.error("-t is for --send only (the receiver cannot know when the data ends)")
    if args.n == 0 and not (args.recv or args.t) and args.proto == "plain":
        p.error("-n 0 (until the peer closes) is for --recv only")

    stats = {"role": args.role, "udp": args.udp, "port": args.port}
    t0 = time.monotonic()
    try:
        if args.udp:
            set_udp_encapsulation(args.udp_port)
        if args.role == "server":
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((args.bind, args.port))
            ls.listen(1)
            ls.settimeout(args.timeout)
            log(f"listening on {args.bind}:{args.port}")
            if args.ready:
                with open(args.ready + ".tmp", "w") as f:
                    f.write("ready\n")
                os.rename(args.ready + ".tmp", args.ready)
            sock, peer = ls.accept()
            ls.close()
        else:
            deadline = time.monotonic() + args.timeout
            while True:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP)
                sock.settimeout(args.timeout)
                try:
                    sock.connect((args.connect, args.port))
                    break
                except (ConnectionRefusedError, TimeoutError, OSError) as e:
                    sock.close()
                    if time.monotonic() > deadline:
                        raise
                    log(f"connect: {e}; retrying")
                    time.sleep(0.5)
            peer = (args.connect, args.port)
        sock.setsockopt(IPPROTO_SCTP, SCTP_NODELAY, 1)
        # Deliver struct sctp_sndrcvinfo (stream, PPID, flags) with every message.
        sock.setsockopt(IPPROTO_SCTP, SCTP_EVENTS, bytes([1]))
        sock.settimeout(args.timeout)
    except OSError as e:
        log(f"setup failed: {e}")
        stats["error"] = str(e)
        print(to_json(stats), flush=True)
        return 2
    stats["peer"] = f"{peer[0]}:{peer[1]}"
    log(f"association with {stats['peer']}")
    if args.started:
        with open(args.started + ".tmp", "w") as f:
            f.write("started\n")
        os.rename(args.started + ".tmp", args.started)

    if args.proto == "sprf":
        try:
            ok, summary = Sprf(sock, args.role == "server", args).run()
        except OSError as e:
            ok, summary = False, {"error": f"transfer failed: {e}"}
        graceful_close(sock)
        stats.update(summary)
        return report(stats, ok, t0, args.out)

    rx = Receiver(args)
    ok = True
    try:
        if args.bidir:
            t = threading.Thread(target=send_all, args=(sock, args, stats))
            t.start()
            rx.run(sock)
            t.join()
        elif args.send:
            send_all(sock, args, stats)
        else:
            rx.run(sock)
        if args.send:
            # Wait for the peer to close: everything sent was received.
            try:
                while sock.recv(1 << 16):
                    pass
            except TimeoutError:
                log("peer did not close")
                ok = False
    except OSError as e:
        log(f"transfer failed: {e}")
        stats["error"] = str(e)
        ok = False
    graceful_close(sock)
    if not args.send:
        stats.update(rx.summary())
        ok = ok and rx.ok()
    if args.send or args.bidir:
        ok = ok and stats.get("sent_bytes") == args.n if not args.t else ok and "sent_bytes" in stats
    return report(stats, ok, t0, args.out)


if __name__ == "__main__":
    sys.exit(main())
