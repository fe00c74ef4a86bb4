#!/usr/bin/env python3
"""Capture checks of the SCTP scenarios, from `softrnic decode --summary` (host side).

    sctp_check.py [--softrnic BIN] PCAP [checks...]

Runs `softrnic decode --summary PCAP`, prints its output, and checks:
  always              decode exits 0 and reports 0 errors (every CRC32c good, every chunk
                      well-formed, every verification tag right)
  --assocs N          at least N associations
  --established N     at least N associations whose handshake completed (INIT .. COOKIE ACK)
  --udp N / --raw N   at least N associations over UDP (RFC 6951) / over raw IP
  --bidir-bytes B     in at least --assocs associations, both directions carried >= B bytes
  --data-path S,D     some association sent DATA from address S to address D
  --no-abort          no association ended with ABORT
Exit 0 when every check holds, 1 otherwise (a line starting with FAIL says why).
"""

import argparse
import os
import re
import subprocess
import sys


def parse(summary):
    assocs = []
    for line in summary.splitlines():
        m = re.match(r"association (\d+): (\S+) -> (\S+)\s+(.*?)\s{2}(\S.*?)\s{2}tags", line)
        if m:
            assocs.append({"id": int(m[1]), "initiator": m[2], "responder": m[3],
                           "encap": m[4], "state": m[5], "bytes": [], "paths": []})
            continue
        m = re.match(r"\s+(I>R|R>I)\s+TSN \S+\s+DATA (\d+) chunks (\d+) bytes", line)
        if m and assocs:
            assocs[-1]["bytes"].append(int(m[3]))
            continue
        m = re.match(r"\s+path (I>R|R>I) (\S+) -> (\S+): (\d+) packets, (\d+) DATA", line)
        if m and assocs:
            assocs[-1]["paths"].append((m[2], m[3], int(m[5])))
    total = re.search(r"SCTP total: (\d+) packets \((\d+) over UDP\), (\d+) associations; (\d+) errors",
                      summary)
    return assocs, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pcap")
    p.add_argument("--softrnic", default=os.environ.get("LAB_SOFTRNIC", "softrnic"))
    p.add_argument("--assocs", type=int, default=1)
    p.add_argument("--established", type=int, default=0)
    p.add_argument("--udp", type=int, default=0)
    p.add_argument("--raw", type=int, default=0)
    p.add_argument("--bidir-bytes", type=int, default=0)
    p.add_argument("--data-path", action="append", default=[])
    p.add_argument("--no-abort", action="store_true")
    a = p.parse_args()

    r = subprocess.run([a.softrnic, "decode", "--summary", a.pcap], check=False, capture_output=True, text=True)
    print(r.stdout, end="")
    print(r.stderr, end="", file=sys.stderr)
    fails = []
    if r.returncode != 0:
        fails.append(f"softrnic decode exit status {r.returncode}")
    assocs, total = parse(r.stdout)
    if total is None:
        fails.append("no SCTP in the capture")
    elif int(total[4]) != 0:
        fails.append(f"{total[4]} decode errors")
    if len(assocs) < a.assocs:
        fails.append(f"{len(assocs)} associations, expected at least {a.assocs}")
    est = [x for x in assocs if x["state"] not in ("init only", "no cookie ack", "setup not captured")]
    if len(est) < a.established:
        fails.append(f"{len(est)} associations completed the handshake, expected {a.established}")
    udp = [x for x in assocs if "UDP" in x["encap"]]
    raw = [x for x in assocs if "raw IP" in x["encap"]]
    if len(udp) < a.udp:
        fails.append(f"{len(udp)} UDP-encapsulated associations, expected {a.udp}")
    if len(raw) < a.raw:
        fails.append(f"{len(raw)} raw-IP associations, expected {a.raw}")
    if a.bidir_bytes:
        both = [x for x in assocs if len(x["bytes"]) == 2 and min(x["bytes"]) >= a.bidir_bytes]
        if len(both) < a.assocs:
            fails.append(f"{len(both)} associations carried >= {a.bidir_bytes} bytes each way, "
                         f"expected {a.assocs}")
    for dp in a.data_path:
        s, d = dp.split(",")
        if not any(ps == s and pd == d and n > 0 for x in assocs for ps, pd, n in x["paths"]):
            fails.append(f"no DATA on path {s} -> {d}")
    if a.no_abort and any(x["state"] == "aborted" for x in assocs):
        fails.append("an association was aborted")
    for f in fails:
        print("FAIL " + f)
    if not fails:
        print(f"ok   {len(assocs)} associations, checks passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
