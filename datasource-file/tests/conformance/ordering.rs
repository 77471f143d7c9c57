//! Ordering and atomicity: rapid writes end on the last, and a combined document updates its
//! families at once.

use super::*;

#[tokio::test]
async fn hundred_rapid_in_place_writes_end_on_the_last_and_never_go_back() {
    let (_dir, path) = temp_rules();
    fs::write(&path, flow_payload(0)).expect("write");
    let engine = Engine::new();
    let source = engine.start(flow(&path)).await;

    // Truncate-and-write each time: the source may read half-written files, which the driver
    // rejects; what it applies must still only move forward. A pause longer than the debounce
    // after every tenth write lets intermediate states through, so there is an order to check.
    for seq in 1..=100 {
        fs::write(&path, flow_payload(seq)).expect("write");
        if seq % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(80)).await;
        }
    }
    engine.wait_seq(Some(100)).await;

    let seqs = engine.seqs();
    assert!(
        seqs.iter().all(Option::is_some),
        "a save is never a deletion: {seqs:?}"
    );
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "an older state applied after a newer one: {seqs:?}"
    );
    assert_eq!(seqs.last(), Some(&Some(100)));
    let status = wait_status(&source, "final state, no error", |s| s.last_error.is_none()).await;
    assert_eq!(status.applied_count as usize, seqs.len(), "{status:?}");
    eprintln!(
        "100 in-place writes: {} applies, {} partial reads rejected",
        seqs.len(),
        status.rejected_count
    );
    source.close().await;
}

/// A combined document whose flow and degrade rules both carry `seq`.
fn combined(seq: u64) -> Vec<u8> {
    format!(
        r#"{{"flow":[{{"resource":"{CONFORMANCE_RESOURCE}","count":{seq},"grade":1}}],
"degrade":[{{"resource":"{CONFORMANCE_RESOURCE}","grade":2,"count":{seq},"timeWindow":1}}]}}"#
    )
    .into_bytes()
}

/// What a reader thread saw of the two families while the documents changed.
#[derive(Debug, Default)]
struct ReaderLog {
    /// Reads of both families within one rule-table version.
    consistent: u64,
    /// Such reads whose flow and degrade sequences differed.
    torn: Vec<(u64, Option<u64>, Option<u64>)>,
    versions: BTreeSet<u64>,
}

#[tokio::test]
async fn combined_document_updates_flow_and_degrade_at_once() {
    const DOCUMENTS: u64 = 20;
    let (_dir, path) = temp_rules();
    fs::write(&path, combined(1)).expect("write");
    let engine = Engine::new();
    let file = FileSource::new(&path).expect("valid settings");
    let source = engine
        .start(DataSource::builder(file, CombinedJson::new()))
        .await;
    assert_eq!(
        (engine.seq(), degrade_seq(&engine.sentinel)),
        (Some(1), Some(1))
    );

    // The two families are two loads, but every apply stores one table with a new version.
    // A pair of reads between two equal version reads therefore saw one table, and must see
    // one document: flow and degrade from the same sequence.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (sentinel, stop) = (engine.sentinel.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut log = ReaderLog::default();
            while !stop.load(Ordering::Relaxed) {
                let before = sentinel.rules_version();
                let flow = applied_seq::<FlowRule>(&sentinel);
                let degrade = degrade_seq(&sentinel);
                if sentinel.rules_version() == before {
                    log.consistent += 1;
                    log.versions.insert(before);
                    if flow != degrade {
                        log.torn.push((before, flow, degrade));
                    }
                }
                std::thread::yield_now();
            }
            log
        })
    };

    let start_version = engine.sentinel.rules_version();
    for seq in 2..=DOCUMENTS {
        save_atomically(&path, &combined(seq));
        engine.wait_seq(Some(seq)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let log = reader.join().expect("the reader thread");

    assert!(log.torn.is_empty(), "torn reads: {:?}", log.torn);
    assert!(
        log.consistent > 0 && log.versions.len() >= 2,
        "the reader saw too little: {log:?}"
    );

    // One apply, one version, both families, per document.
    let applied = engine.recorder.applied();
    assert_eq!(applied.len() as u64, DOCUMENTS, "{applied:?}");
    for (i, apply) in applied.iter().enumerate() {
        let seq = i as u64 + 1;
        assert_eq!(
            (apply.seq::<FlowRule>(), apply.seq::<DegradeRule>()),
            (Some(seq), Some(seq)),
            "{apply:?}"
        );
        assert!(
            apply.families.contains(&RuleFamily::Flow)
                && apply.families.contains(&RuleFamily::Degrade),
            "one event replaces both families: {apply:?}"
        );
    }
    for pair in applied.windows(2) {
        assert_eq!(
            pair[1].version,
            pair[0].version + 1,
            "one bump per document"
        );
    }
    let end_version = engine.sentinel.rules_version();
    assert_eq!(end_version - start_version, DOCUMENTS - 1);

    assert_eq!(
        engine.sentinel.degrade_rules().rules(),
        vec![DegradeRule::error_count(
            CONFORMANCE_RESOURCE,
            DOCUMENTS as f64,
            1
        )]
    );
    let status = source.status();
    assert_eq!(status.applied_count, DOCUMENTS, "{status:?}");
    assert_eq!(status.rules_version, Some(end_version));
    assert_eq!(status.families, vec![RuleFamily::Flow, RuleFamily::Degrade]);
    source.close().await;
}
