#!/usr/bin/env python3
"""Check a lab capture's MPA sessions with `softrnic decode`, and its RDMAP opcode counts
against tshark's.

Usage: check_session.py PCAP --softrnic BIN --expect SPEC [--expect SPEC ...] [--no-tshark]

SPEC = INITIATOR_IP:key=value,...  One established MPA connection whose initiator has that
address must exist for every SPEC, each with at least one FPDU, and all of them must show
the given values in `softrnic decode --summary`:
    rev=1|2   crc=on|off   p2p=off|write|read|send   mkr=off/off ...   ird_i=16/16 ...
Rejected/failed MPA connections fail the check. Every connection must decode with 0
errors (decode's exit status 0). With tshark installed, per-opcode RDMAP counts from
`softrnic decode --counts` must equal tshark's (same method as scripts/tshark-crosscheck.sh),
unless tshark decodes no RDMAP at all in the capture (noted, not failed).
Prints "ok ..." / "FAIL ..." lines; exit 0 when all checks pass.
"""
import argparse
import re
import shutil
import subprocess
import sys

ROW = re.compile(
    r"^\s*(\d+)\s+([\d.]+):(\d+) -> ([\d.]+):(\d+)\s+(.+?)\s{2,}(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+"
    r"(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$"
)


def parse_summary(text):
    """The connection rows of `softrnic decode --summary` output."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        g = m.groups()
        p2p = g[11].lower().removeprefix("on/")
        rows.append({
            "conn": int(g[0]), "initiator": g[1], "responder": g[3], "status": g[5].strip(),
            "rev": g[6], "crc": g[7], "mkr": g[8], "ird_i": g[9], "ird_r": g[10], "p2p": p2p,
            "fpdus": int(g[12]), "crc_ok": int(g[13]), "errors": int(g[14]),
        })
    return rows


def parse_counts(text):
    """Opcode counts from `softrnic decode --counts` output: {"0x00": 6, ...}."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and f[0].startswith("0x"):
            out[f[0].lower()] = int(f[2])
    return out


def parse_tshark(text):
    """Opcode counts from tshark's `-T fields -e iwarp_rdma.opcode` output."""
    out = {}
    for line in text.splitlines():
        for op in line.split(","):
            op = op.strip().lower()
            if op:
                out[op] = out.get(op, 0) + 1
    return out


def summary(binary, pcap):
    p = subprocess.run([binary, "decode", "--summary", pcap], check=False, capture_output=True, text=True)
    return p.returncode, p.stdout, parse_summary(p.stdout)


def counts_ours(binary, pcap):
    p = subprocess.run([binary, "decode", "--counts", pcap], check=False, capture_output=True, text=True)
    return parse_counts(p.stdout)


def counts_tshark(pcap):
    p = subprocess.run(
        ["tshark", "-r", pcap, "-o", "tcp.reassemble_out_of_order:TRUE",
         "--disable-protocol", "rpcordma", "--disable-protocol", "smb_direct",
         # EtherCAT-over-TCP claims port 34980, which can be an MPA connection's ephemeral
         # port (see scripts/tshark-crosscheck.sh).
         "--disable-protocol", "ecatf",
         "-Y", "iwarp_ddp_rdmap", "-T", "fields", "-e", "iwarp_rdma.opcode"],
        check=False, capture_output=True, text=True)
    return parse_tshark(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--softrnic", required=True)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--no-tshark", action="store_true")
    a = ap.parse_args()
    fail = 0
    rc, text, rows = summary(a.softrnic, a.pcap)
    print(text)
    if rc != 0:
        print(f"FAIL softrnic decode exit status {rc} (errors in the capture)")
        fail = 1
    for r in rows:
        if r["status"] in ("rejected", "setup failed", "request only"):
            print(f"FAIL conn {r['conn']} {r['initiator']} -> {r['responder']}: {r['status']}")
            fail = 1
        if r["errors"]:
            print(f"FAIL conn {r['conn']}: {r['errors']} decode errors")
            fail = 1
    for spec in a.expect:
        ip, _, kv = spec.partition(":")
        want = dict(x.split("=", 1) for x in kv.split(",") if x)
        mine = [r for r in rows if r["initiator"] == ip and r["status"] == "established"]
        if not mine:
            print(f"FAIL {spec}: no established MPA connection initiated by {ip}")
            fail = 1
            continue
        for r in mine:
            bad = [f"{k}={r.get(k)} (want {v})" for k, v in want.items() if str(r.get(k)) != v]
            if r["fpdus"] == 0:
                bad.append("no FPDUs")
            if r["crc"] == "on" and r["crc_ok"] != r["fpdus"]:
                bad.append(f"CRC good on {r['crc_ok']} of {r['fpdus']} FPDUs")
            tag = f"conn {r['conn']} {r['initiator']} -> {r['responder']} ({spec})"
            print(("FAIL " if bad else "ok   ") + tag + (": " + "; ".join(bad) if bad else ""))
            fail |= bool(bad)
    if not a.no_tshark and shutil.which("tshark"):
        ours, theirs = counts_ours(a.softrnic, a.pcap), counts_tshark(a.pcap)
        if not theirs:
            print("note tshark decodes no RDMAP in this capture: opcode cross-check not possible")
        else:
            for op in sorted(set(ours) | set(theirs)):
                o, t = ours.get(op, 0), theirs.get(op, 0)
                print(("ok   " if o == t else "FAIL ") + f"opcode {op}: softrnic {o}, tshark {t}")
                fail |= o != t
    elif not a.no_tshark:
        print("note tshark not installed: opcode cross-check skipped")
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
