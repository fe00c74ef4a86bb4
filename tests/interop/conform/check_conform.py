#!/usr/bin/env python3
"""Compare the JSON reports of `softrnic conform` with an expectation file.

    check_conform.py EXPECT.json --responder responder.json [--initiator initiator.json]
                     [--softrnic BIN]
    check_conform.py --draft --responder responder.json --initiator initiator.json

The expectation file (tests/interop/conform/expect/<siw build>.json) holds, for each mode
("responder": the peer listens, "initiator": the peer connects to `conform --listen`), every
case of the catalogue with the verdict the peer must get (a file may hold one mode only, for
a peer application that serves one role: then only that mode is compared) and, for anything but PASS, `reason`:
a piece of text that the report's reason must contain (what makes the verdict right: the
deviation's name, the feature declined, the rule broken), and `why`, the note for readers.

Fails (exit 1) on any difference: a verdict other than expected, a non-PASS result whose
reason is empty or lacks the expected text, a case of the expectation missing from the report,
a case of the report missing from the expectation, and (with --softrnic) a case of the
catalogue (`softrnic conform --list`) in neither. `--draft` prints an expectation file made
from the reports, to be reviewed by hand before it is kept.
"""

import argparse
import json
import subprocess
import sys

MODES = ("responder", "initiator")
VERDICTS = ("PASS", "FAIL", "DEVIATION", "N/A")


def catalogue(softrnic):
    """{mode: [case id]} from `softrnic conform --list` (id, then "responder" or "initiator")."""
    out = subprocess.run([softrnic, "conform", "--list"], capture_output=True, text=True, check=True).stdout
    ids = {m: [] for m in MODES}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2 and words[1] in MODES:
            ids[words[1]].append(words[0])
    return ids


def compare(expect, reports, cat=None):
    """Problems (a list of lines) found comparing `reports` ({mode: report}) with `expect`."""
    problems = []
    for mode in MODES:
        if mode not in expect:
            continue
        exp = expect[mode]
        rep = reports.get(mode)
        if rep is None:
            problems.append(f"{mode}: no report")
            continue
        results = {}
        for r in rep.get("results", []):
            if r.get("id") in results:
                problems.append(f"{mode} {r.get('id')}: more than one result")
            results[r.get("id")] = r
        for cid, r in results.items():
            v = r.get("verdict")
            if v not in VERDICTS:
                problems.append(f"{mode} {cid}: no verdict ({v!r})")
            elif v != "PASS" and not r.get("reason", "").strip():
                problems.append(f"{mode} {cid}: {v} without a reason")
        for cid in sorted(set(results) - set(exp)):
            r = results[cid]
            got = f"{r.get('verdict')}: {r.get('reason', '')}"
            problems.append(f"{mode} {cid}: not in the expectation file (got {got})")
        for cid, e in exp.items():
            r = results.get(cid)
            if r is None:
                problems.append(f"{mode} {cid}: no result in the report (expected {e['verdict']})")
                continue
            if r.get("verdict") != e["verdict"]:
                problems.append(
                    f"{mode} {cid}: {r.get('verdict')} instead of {e['verdict']}; peer did: "
                    f"{r.get('observed', '')}; reason: {r.get('reason', '')}"
                )
            elif e["verdict"] != "PASS" and e.get("reason", "") not in r.get("reason", ""):
                problems.append(
                    f"{mode} {cid}: {e['verdict']} for another reason: {r.get('reason', '')!r} "
                    f"lacks {e.get('reason', '')!r}"
                )
        if cat is not None:
            for cid in cat.get(mode, []):
                if cid not in results and cid not in exp:
                    problems.append(f"{mode} {cid}: in the catalogue but neither run nor expected")
    for mode in MODES:
        for cid, e in expect.get(mode, {}).items():
            if e.get("verdict") not in VERDICTS:
                problems.append(f"expectation {mode} {cid}: bad verdict {e.get('verdict')!r}")
            elif e["verdict"] != "PASS" and not e.get("reason"):
                problems.append(f"expectation {mode} {cid}: {e['verdict']} needs a reason")
    return problems


def summary(rep):
    s = rep.get("summary", {})
    return (
        f"{s.get('cases', 0)} cases: {s.get('pass', 0)} PASS, {s.get('fail', 0)} FAIL, "
        f"{s.get('deviation', 0)} DEVIATION, {s.get('not_applicable', 0)} N/A"
    )


def draft(reports):
    out = {}
    for mode in MODES:
        if mode not in reports:
            continue
        out[mode] = {}
        for r in reports.get(mode, {}).get("results", []):
            e = {"verdict": r["verdict"]}
            if r["verdict"] != "PASS":
                e["reason"] = r.get("reason", "")
                e["why"] = ""
            out[mode][r["id"]] = e
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expect", nargs="?")
    ap.add_argument("--responder", required=True)
    ap.add_argument("--initiator")
    ap.add_argument("--softrnic")
    ap.add_argument("--draft", action="store_true")
    a = ap.parse_args(argv)
    reports = {}
    for mode in MODES:
        if getattr(a, mode) is None:
            continue
        try:
            reports[mode] = load(getattr(a, mode))
        except (OSError, ValueError) as e:
            print(f"FAIL: {mode} report: {e}")
            if not a.draft:
                return 1
    if a.draft:
        print(json.dumps(draft(reports), indent=2))
        return 0
    if not a.expect:
        ap.error("EXPECT.json is needed (or --draft)")
    expect = load(a.expect)
    cat = catalogue(a.softrnic) if a.softrnic else None
    for mode in MODES:
        if mode in reports:
            print(f"{mode}: {summary(reports[mode])}")
    problems = compare(expect, reports, cat)
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    n = sum(len(expect.get(m, {})) for m in MODES)
    print(f"ok: all {n} cases as expected ({a.expect})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
