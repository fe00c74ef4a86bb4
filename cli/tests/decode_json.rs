//! `softrnic decode --json` on the golden captures: every line is a JSON object, records
//! first and a summary last, and the summary's counts are what `--counts` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn golden() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/golden");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "{v:?}");
    v
}

fn run(args: &[&str], file: &Path) -> (String, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .arg("decode")
        .args(args)
        .arg(file)
        .output()
        .expect("softrnic runs");
    (String::from_utf8(out.stdout).unwrap(), out.status.code())
}

/// The `--counts` lines a summary object stands for.
fn counts_of(summary: &Value) -> String {
    let mut s = String::new();
    for c in summary["opcodes"].as_array().unwrap() {
        s += &format!(
            "{:#04x} {} {}\n",
            c["code"].as_u64().unwrap(),
            c["name"].as_str().unwrap().replace(' ', "-"),
            c["count"].as_u64().unwrap()
        );
    }
    if let Some(sctp) = summary.get("sctp") {
        for c in sctp["chunks"].as_array().unwrap() {
            s += &format!(
                "sctp {:#04x} {} {}\n",
                c["code"].as_u64().unwrap(),
                c["name"].as_str().unwrap().replace(' ', "-"),
                c["count"].as_u64().unwrap()
            );
        }
    }
    s
}

#[test]
fn json_lines_parse_and_summary_matches_counts() {
    for file in golden() {
        let (json, status) = run(&["--json"], &file);
        let (counts, counts_status) = run(&["--counts"], &file);
        assert_eq!(status, counts_status, "{}", file.display());
        let lines: Vec<Value> = json
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let (summary, records) = lines.split_last().expect("a summary line");
        assert_eq!(summary["type"], "summary", "{}", file.display());
        assert_eq!(counts_of(summary), counts, "{}", file.display());
        // Records: the keys every line has, typed.
        let mut rdmap_records = 0u64;
        let mut errors = 0u64;
        for r in records {
            assert_eq!(r["type"], "record");
            assert!(r["frame"].is_u64() && r["timestamp"].is_f64(), "{r}");
            assert!(r["text"].is_string() && r["fields"].is_object(), "{r}");
            let layer = r["layer"].as_str().unwrap();
            assert!(
                ["tcp", "mpa", "ddp", "rdmap", "sctp"].contains(&layer),
                "{r}"
            );
            let verdict = r["verdict"].as_str().unwrap();
            assert!(["info", "warning", "error"].contains(&verdict), "{r}");
            if r.get("connection").is_some() {
                assert!(r["offset"].is_u64(), "{r}");
                if verdict == "error" {
                    errors += 1;
                }
                if r["fields"].get("opcode").is_some() {
                    rdmap_records += 1;
                }
            } else {
                assert!(r.get("association").is_some(), "{r}");
            }
        }
        let opcodes: u64 = summary["opcodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["count"].as_u64().unwrap())
            .sum();
        assert_eq!(rdmap_records, opcodes, "{}", file.display());
        assert_eq!(
            summary["errors"].as_u64(),
            Some(errors),
            "{}",
            file.display()
        );
    }
}

/// The Read Requests of rping carry their sizes and STags as numbers.
#[test]
fn json_read_request_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/golden");
    let (json, status) = run(&["--json"], &dir.join("siw-rping-crc.pcap"));
    assert_eq!(status, Some(0));
    let reads: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["fields"]["opcode_name"] == "RDMA Read Request")
        .collect();
    assert_eq!(reads.len(), 4);
    let sizes: Vec<u64> = reads
        .iter()
        .map(|v| v["fields"]["read_size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [64, 64, 2000, 2000]);
    for r in &reads {
        assert_eq!(r["layer"], "rdmap");
        assert_eq!(r["direction"], "R>I");
        assert_eq!(r["fields"]["qn"], 1);
        assert_eq!(r["fields"]["source_stag"], 0x1111_1100);
    }
    assert_eq!(reads[2]["fields"]["crc"], "good");
}
