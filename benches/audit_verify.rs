//! Records checked per second by `portcullis audit verify`, and the memory it takes, on a long
//! log.
//!
//! Builds a keyed SQLite audit log of `PORTCULLIS_BENCH_RECORDS` records (1,000,000 unless
//! told), through the store's batched append, then opens the store again as the command line
//! does and runs its verify (`Store::verify_audit`, which reads the log a page at a time). The
//! same records, written as a JSON Lines file, verify through `verify_json_lines`; so do the
//! same records written in the format's version 1 (by hand, as the guide's audit page spells
//! it), and a log of version 1 records continued in version 2, as a log from before version 2
//! reads after an upgrade. For each it prints records per second and the process's peak
//! resident memory during the verify above what it held before (the peak is reset after the
//! build, through `/proc/self/clear_refs`). Everything lives in a temporary directory, removed
//! afterwards. Run with `cargo bench --bench audit_verify`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use hmac::{Hmac, KeyInit, Mac};
use portcullis::audit::{self, AuditKey, AuditRecord, AuditSink, JsonLinesAuditSink, Unchained};
use portcullis_stores::{SqliteStore, Store};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Records in the log, unless `PORTCULLIS_BENCH_RECORDS` says otherwise.
const RECORDS: u64 = 1_000_000;

/// Records handed to the store's writer before waiting for them.
const BATCH: u64 = 10_000;

fn records() -> u64 {
    std::env::var("PORTCULLIS_BENCH_RECORDS")
        .ok()
        .and_then(|records| records.parse().ok())
        .unwrap_or(RECORDS)
}

/// The audit key's secret.
const SECRET: &[u8] = b"the bench's audit key, 32 bytes!";

fn key() -> AuditKey {
    AuditKey::new(SECRET.to_vec()).expect("a key of 32 bytes")
}

/// A record as a registry writes one for a completed call of a medium-risk tool.
fn record(index: u64) -> AuditRecord {
    AuditRecord {
        version: 2,
        sequence: 0,
        time_ms: 1_780_000_000_000 + index,
        trace_id: format!("trace-{index:016x}"),
        task_id: format!("task-{}", index / 100),
        actor: "agent@billing".to_owned(),
        tenant: Some("acme".to_owned()),
        tool: "transfer".to_owned(),
        call_id: format!("call_{index:024}"),
        arguments: json!({
            "from_account": "ACME-OPERATING-0001",
            "to_account": format!("SUPPLIER-{:06}", index % 1000),
            "amount_cents": index * 7 % 1_000_000,
            "memo": "invoice settlement, net 30",
        }),
        decision: "completed".to_owned(),
        gate: None,
        code: None,
        reason: None,
        summary: json!({"transfer_id": format!("tr_{index:020}"), "status": "settled"}).to_string(),
        resolution: None,
        original_arguments: None,
        snapshot_before: None,
        snapshot_after: None,
        snapshot_missing: None,
        sources: Vec::new(),
        rulings: Vec::new(),
        budget_calls: 1,
        budget_cost: 1,
        duration_us: 180 + index % 50,
        previous_hash: String::new(),
        hash: String::new(),
    }
}

/// Appends `count` records to the SQLite store at `path`, keyed with `key`, a batch at a time.
async fn build(path: &Path, count: u64, key: &AuditKey) {
    let store = SqliteStore::open(path).expect("a SQLite store");
    let mut next = 0;
    while next < count {
        let end = (next + BATCH).min(count);
        let waits: Vec<_> = (next..end)
            .map(|index| store.append(Unchained::new(record(index), Some(key.clone()))))
            .collect();
        for wait in waits {
            wait.await.expect("the record is stored");
        }
        next = end;
    }
}

/// Writes `count` records to a JSON Lines file at `path`: the first `in_v1` in version 1,
/// linked by hand as the guide spells it, the others appended in version 2 by a
/// [`JsonLinesAuditSink`] that continues the chain.
async fn write_versions(path: &Path, count: u64, in_v1: u64, key: &AuditKey, secret: &[u8]) {
    let mut file = BufWriter::new(File::create(path).expect("a JSON Lines file"));
    let mut head = audit::Checkpoint::genesis();
    for index in 0..in_v1 {
        let mut record = AuditRecord {
            version: 1,
            ..record(index)
        };
        let unplaced = serde_json::to_vec(&record).expect("a record serializes");
        let digest = hex(&Sha256::digest(&unplaced));
        let mut link = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key");
        link.update(format!("{index}\n{}\n{digest}", head.head).as_bytes());
        record.sequence = index;
        record.previous_hash = head.head.clone();
        record.hash = hex(&link.finalize().into_bytes());
        serde_json::to_writer(&mut file, &record).expect("a record serializes");
        file.write_all(b"\n").expect("the file is written");
        head = audit::Checkpoint::after(&record);
    }
    file.flush().expect("the file is written");
    drop(file);
    let sink = JsonLinesAuditSink::open(path, false).expect("the log opens");
    for index in in_v1..count {
        sink.append(Unchained::new(record(index), Some(key.clone())))
            .await
            .expect("the record is written");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes the store's log, as `portcullis audit export` does, to a JSON Lines file.
async fn export(store: &Store, path: &Path) {
    let mut file = BufWriter::new(File::create(path).expect("a JSON Lines file"));
    let mut next = 0;
    loop {
        let page = store
            .audit_records(next, Some(BATCH))
            .await
            .expect("the log reads");
        for record in &page {
            serde_json::to_writer(&mut file, record).expect("a record serializes");
            file.write_all(b"\n").expect("the file is written");
        }
        next += page.len() as u64;
        if (page.len() as u64) < BATCH {
            break;
        }
    }
    file.flush().expect("the file is written");
}

/// Kibibytes of a line of `/proc/self/status`, such as `VmRSS` or `VmHWM`.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Runs `verify`, and prints its rate and the peak resident memory it added.
async fn measure<F: Future<Output = audit::Checkpoint>>(name: &str, count: u64, verify: F) {
    // Resets the peak (VmHWM) to the resident memory now, so that what the build held does
    // not count.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib("VmRSS:");
    let started = Instant::now();
    let reached = verify.await;
    let seconds = started.elapsed().as_secs_f64();
    let peak = status_kib("VmHWM:");
    assert_eq!(reached.length, count, "the whole log verifies");
    println!(
        "  {name:<12} {count} records in {seconds:.2} s: {:>9.0} records/s, peak resident {:.1} MiB above the {:.1} MiB before{}",
        count as f64 / seconds,
        peak.saturating_sub(before) as f64 / 1024.0,
        before as f64 / 1024.0,
        if reset {
            ""
        } else {
            " (the peak could not be reset: it includes the build)"
        },
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let count = records();
    let key = key();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let database = dir.path().join("audit.db");
    let started = Instant::now();
    build(&database, count, &key).await;
    let size = std::fs::metadata(&database).map_or(0, |meta| meta.len());
    println!(
        "built a keyed SQLite log of {count} records ({:.0} MiB) in {:.1} s",
        size as f64 / (1024.0 * 1024.0),
        started.elapsed().as_secs_f64()
    );
    let lines = dir.path().join("audit.jsonl");
    {
        let store = Store::open_existing(database.to_str().expect("a UTF-8 path"))
            .await
            .expect("the store opens");
        export(&store, &lines).await;
    }

    println!(
        "audit verify (keyed, pages of {} records):",
        Store::VERIFY_PAGE
    );
    let store = Store::open_existing(database.to_str().expect("a UTF-8 path"))
        .await
        .expect("the store opens");
    measure("SQLite", count, async {
        store
            .verify_audit(Some(&key), None)
            .await
            .expect("the log verifies")
    })
    .await;
    drop(store);
    let verify_lines = |path: &Path| {
        let file = File::open(path).expect("the JSON Lines file");
        audit::verify_json_lines(BufReader::new(file), Some(&key), None).expect("the log verifies")
    };
    measure("JSON Lines", count, async { verify_lines(&lines) }).await;
    for (name, in_v1) in [("version 1", count), ("v1, then v2", count / 2)] {
        let path = dir.path().join("versions.jsonl");
        write_versions(&path, count, in_v1, &key, SECRET).await;
        measure(name, count, async { verify_lines(&path) }).await;
    }
}
