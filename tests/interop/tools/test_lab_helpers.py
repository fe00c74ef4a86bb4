"""Tests of the interop lab's Python helpers, on the golden captures and on recorded outputs
of `softrnic decode` and tshark (tests/interop/tools/testdata; scripts/lint-lab.sh checks that
the recordings still match what the decoder prints).

    python3 -m unittest discover -s tests/interop/tools -p 'test_*.py'
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "siw-variants"))
sys.path.insert(0, os.path.join(HERE, "..", "conform"))

import check_conform  # noqa: E402
import check_session  # noqa: E402
import mpa_lab  # noqa: E402
import sctp_check  # noqa: E402
import sctp_peer  # noqa: E402


def testdata(name):
    with open(os.path.join(HERE, "testdata", name)) as f:
        return f.read()


def golden(name):
    return os.path.join(ROOT, "tests", "data", "golden", name)


class MpaFrames(unittest.TestCase):
    def test_build_and_parse_round_trip(self):
        """RFC 5044 §7.1 frame with the RFC 6581 IRD/ORD words and RTR bits."""
        f = mpa_lab.build_frame(mpa_lab.KEY_REQ, 2, crc=True, ird=5, ord_=7, p2p=True,
                                rtr_read=True, extra=b"hi")
        info = mpa_lab.parse_frame(f)
        self.assertEqual(info["kind"], "request")
        self.assertEqual((info["rev"], info["C"], info["H"], info["M"]), (2, True, True, False))
        self.assertEqual((info["ird"], info["ord"]), (5, 7))
        self.assertTrue(info["p2p"] and info["rtr_read"])
        self.assertFalse(info["rtr_write"] or info["rtr_send"])
        self.assertEqual(info["pd_len"], 6)

    def test_incomplete_or_foreign_frames_are_none(self):
        f = mpa_lab.build_frame(mpa_lab.KEY_REP, 1, reject=True)
        self.assertEqual(mpa_lab.parse_frame(f)["R"], True)
        self.assertIsNone(mpa_lab.parse_frame(f[:19]))
        self.assertIsNone(mpa_lab.parse_frame(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 8))

    def test_frames_of_a_real_siw_setup(self):
        """The golden capture of Linux siw's MPA v2 setup: rping's IRD/ORD 1/1 request, then
        a 16/16 exchange, no CRC, no markers."""
        frames = list(mpa_lab.mpa_frames(golden("siw-mpa-setup.pcap")))
        kinds = [f["kind"] for f in frames]
        self.assertEqual(kinds, ["request", "request", "reply", "request", "reply"])
        self.assertTrue(all(f["rev"] == 2 and f["H"] and not f["C"] and not f["M"] for f in frames))
        self.assertEqual((frames[0]["ird"], frames[0]["ord"]), (1, 1))
        self.assertEqual((frames[2]["ird"], frames[2]["ord"]), (16, 16))
        self.assertEqual(frames[2]["src"], "10.99.0.1:7174")


class DecodeOutputs(unittest.TestCase):
    def test_summary_rows(self):
        rows = check_session.parse_summary(testdata("siw-rping-crc.summary.txt"))
        self.assertEqual([r["conn"] for r in rows], [1, 2, 3])
        est = [r for r in rows if r["status"] == "established"]
        self.assertEqual(len(est), 2)
        self.assertEqual([(r["crc"], r["fpdus"], r["crc_ok"]) for r in est],
                         [("off", 14, 0), ("on", 18, 18)])
        self.assertTrue(all(r["errors"] == 0 and r["rev"] == "2" for r in est))

    def test_counts_agree_with_tshark(self):
        ours = check_session.parse_counts(testdata("siw-rping-crc.counts.txt"))
        theirs = check_session.parse_tshark(testdata("siw-rping-crc.tshark.txt"))
        self.assertEqual(ours, {"0x00": 6, "0x01": 4, "0x02": 6, "0x03": 16})
        self.assertEqual(ours, theirs)

    def test_sctp_summary(self):
        assocs, total = sctp_check.parse(testdata("sctp-multihomed-failover.summary.txt"))
        self.assertEqual(len(assocs), 1)
        a = assocs[0]
        self.assertEqual((a["initiator"], a["responder"]), ("10.99.0.3:33559", "10.99.0.2:5003"))
        self.assertEqual(a["bytes"], [68000, 58000])
        # Data went over both paths of the multihomed association.
        self.assertEqual({p[0] for p in a["paths"]}, {"10.99.0.3", "10.99.0.2", "10.99.1.2", "10.99.1.3"})
        self.assertTrue(all(p[2] > 0 for p in a["paths"]))
        self.assertEqual((int(total[1]), int(total[2]), int(total[3]), int(total[4])), (214, 0, 1, 0))


class SctpPerfProtocol(unittest.TestCase):
    def test_pattern_matches_softrnic(self):
        """The same bytes as softrnic's sctp-perf (cli/src/sctp_perf.rs pins the same vector):
        the guest-side peer verifies softrnic's data with it."""
        p = sctp_peer.sprf_pattern(3, 1000, 600)
        self.assertEqual(list(p[:4]), [49, 56, 63, 70])
        self.assertEqual(list(p[300:304]), [100, 109, 114, 123])

    def test_pattern_is_deterministic_and_distinct(self):
        a = sctp_peer.sprf_pattern(1, 2, 64)
        self.assertEqual(a, sctp_peer.sprf_pattern(1, 2, 64))
        self.assertEqual(len(a), 64)
        self.assertNotEqual(a, sctp_peer.sprf_pattern(1, 3, 64))
        self.assertNotEqual(a, sctp_peer.sprf_pattern(2, 2, 64))



class ConformExpectations(unittest.TestCase):
    """conform/check_conform.py: a `softrnic conform` report against an expectation file."""

    def reports(self):
        return {
            "responder": {"results": [
                {"id": "mpa-rev2", "verdict": "PASS", "reason": ""},
                {"id": "rdmap-terminate-layout", "verdict": "DEVIATION",
                 "reason": "Linux siw 6.1's layout: Layer and Error Type exchanged"},
            ]},
            "initiator": {"results": [
                {"id": "init-rtr-type", "verdict": "N/A", "reason": "the peer does not ask for peer-to-peer mode"},
            ]},
        }

    def expect(self):
        return {
            "responder": {
                "mpa-rev2": {"verdict": "PASS"},
                "rdmap-terminate-layout": {"verdict": "DEVIATION", "reason": "Linux siw 6.1's layout"},
            },
            "initiator": {
                "init-rtr-type": {"verdict": "N/A", "reason": "does not ask for peer-to-peer"},
            },
        }

    def test_matching_reports_pass(self):
        self.assertEqual(check_conform.compare(self.expect(), self.reports()), [])

    def test_another_verdict_or_reason_fails(self):
        r = self.reports()
        r["responder"]["results"][1]["verdict"] = "FAIL"
        self.assertTrue(any("FAIL instead of DEVIATION" in p for p in check_conform.compare(self.expect(), r)))
        r = self.reports()
        r["initiator"]["results"][0]["reason"] = "the peer's Request cannot be accepted"
        self.assertTrue(any("for another reason" in p for p in check_conform.compare(self.expect(), r)))

    def test_missing_extra_and_unjudged_cases_fail(self):
        r = self.reports()
        del r["responder"]["results"][0]
        self.assertTrue(any("mpa-rev2: no result" in p for p in check_conform.compare(self.expect(), r)))
        r = self.reports()
        r["responder"]["results"].append({"id": "mpa-new", "verdict": "PASS", "reason": ""})
        self.assertTrue(any("mpa-new: not in the expectation" in p for p in check_conform.compare(self.expect(), r)))
        r = self.reports()
        r["responder"]["results"][0]["verdict"] = None
        self.assertTrue(any("no verdict" in p for p in check_conform.compare(self.expect(), r)))
        r = self.reports()
        r["responder"]["results"][1]["reason"] = ""
        self.assertTrue(any("without a reason" in p for p in check_conform.compare(self.expect(), r)))
        self.assertTrue(any("initiator: no report" in p
                            for p in check_conform.compare(self.expect(), {"responder": self.reports()["responder"]})))

    def test_one_mode_expectation_compares_that_mode_only(self):
        e = {"responder": self.expect()["responder"]}
        self.assertEqual(check_conform.compare(e, {"responder": self.reports()["responder"]}), [])
        r = self.reports()["responder"]
        r["results"][0]["verdict"] = "FAIL"
        self.assertTrue(any("mpa-rev2: FAIL instead of PASS" in p for p in check_conform.compare(e, {"responder": r})))

    def test_catalogue_cases_neither_run_nor_expected_fail(self):
        cat = {"responder": ["mpa-rev2", "rdmap-terminate-layout", "mpa-rev1"], "initiator": ["init-rtr-type"]}
        self.assertEqual(check_conform.compare(self.expect(), self.reports(), cat),
                         ["responder mpa-rev1: in the catalogue but neither run nor expected"])

    def test_expectation_files_are_well_formed(self):
        d = os.path.join(HERE, "..", "conform", "expect")
        names = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        self.assertIn("stock.json", names)
        for n in names:
            e = check_conform.load(os.path.join(d, n))
            # Every responder case of the MPA catalogue, and every initiator case when the
            # file holds that mode.
            self.assertEqual(len(e["responder"]), 46, n)
            if "initiator" in e:
                self.assertEqual(len(e["initiator"]), 7, n)
            for mode in check_conform.MODES:
                for cid, x in e.get(mode, {}).items():
                    self.assertIn(x["verdict"], check_conform.VERDICTS, (n, cid))
                    if x["verdict"] != "PASS":
                        self.assertTrue(x.get("reason") and x.get("why"), (n, cid))


class SiwCompare(unittest.TestCase):
    """tests/interop/lib/siw-compare.sh: the rounds' medians and the host-side check."""

    LIB = os.path.join(ROOT, "tests", "interop", "lib", "siw-compare.sh")

    def sh(self, script, results=""):
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "perf-results.txt")
            with open(res, "w") as f:
                f.write(results)
            table = os.path.join(d, "perf-table.txt")
            with open(table, "w") as f:
                f.write("the table\n")
            return subprocess.run(["bash", "-c", '. "$1"; ' + script, "sh", self.LIB, res, table],
                                  check=False, capture_output=True, text=True)

    def rounds(self, values):
        """Results with every name the check wants (the library's CMP_NAMES but the ICMP
        one) in each round of `values` (name -> list of numbers; three rounds of 10.0 by
        default), and one ICMP reference."""
        names = self.sh('echo "$CMP_NAMES"').stdout.split()
        self.assertIn("siw_write_bw_4k", names)
        lines = []
        for name in names:
            if name == "icmp_half_rtt":
                continue
            for v in values.get(name, [10.0, 10.0, 10.0]):
                lines.append(f"{name} {v}")
        lines.append("icmp_half_rtt 100.0")
        return "\n".join(lines) + "\n"

    def test_table_gives_medians_ranges_and_ratios_of_medians(self):
        r = self.rounds({"softrnic_write_bw_64k": [59.38, 90.62, 81.25],
                         "siw_write_bw_64k": [45.42, 52.35, 50.98]})
        # siw's latency: two rounds of three produced a number (an even count's median).
        r += "siw_write_lat_2 300.0\nsiw_write_lat_2 200.0\n"
        out = self.sh('cmp_table "$2" "one guest"', r)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {line.split(" | ")[0].lstrip("| "): line for line in out.stdout.splitlines()}
        bw = rows["RDMA Write 64 KiB, MB/s"]
        self.assertIn("| 81.2 (59.4-90.6) |", bw)
        self.assertIn("| 51.0 (45.4-52.4) |", bw)
        self.assertTrue(bw.endswith(f"| {81.25 / 50.98:.2f}x | 0.20x |"), bw)
        lat = rows["RDMA Write 2 B latency, us (median)"]
        self.assertIn("| 250.0 (200.0-300.0) |", lat)
        self.assertIn("| n/a |", rows["Send 2 B latency, us (median)"])
        self.assertIn("| 100.0 |", rows["ICMP echo, half round trip (latency floor), us (median)"])
        self.assertIn("the median of 3 rounds", out.stdout)

    def test_check_wants_every_round_but_of_siw_latency_and_one_icmp(self):
        ok = self.sh('cmp_check "$2" "$3"', self.rounds({}))
        self.assertEqual(ok.returncode, 0, ok.stdout)
        self.assertIn("the table", ok.stdout)
        short = self.sh('cmp_check "$2" "$3"', self.rounds({"siw_write_bw_4k": [8.0, 9.0]}))
        self.assertNotEqual(short.returncode, 0)
        self.assertIn("2 of 3 numbers for siw_write_bw_4k", short.stdout)
        no_icmp = self.sh('cmp_check "$2" "$3"',
                          self.rounds({}).replace("icmp_half_rtt 100.0\n", ""))
        self.assertNotEqual(no_icmp.returncode, 0)
        self.assertIn("0 of 1 numbers for icmp_half_rtt", no_icmp.stdout)


if __name__ == "__main__":
    unittest.main()
