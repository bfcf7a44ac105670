//! `awa job enqueue --unique-by / --unique-period / --unique-states`, as
//! the `awa` binary against real PostgreSQL: duplicates exit 3 naming the
//! existing job, bad specs are refused before connecting, and concurrent
//! processes enqueueing one job get one job and are each told its id.

use crate::common;

use common::{Run, awa, migrated_db, spawn_awa};

fn enqueue_args<'a>(args: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "job",
        "enqueue",
        "--queue",
        "refresh",
        "--kind",
        "refresh_account",
        "--args",
        args,
        "--json",
    ];
    v.extend_from_slice(extra);
    v
}

const BY_ARGS: &[&str] = &["--unique-by", "args", "--unique-period", "10m"];

fn jobs_in(url: &str, queue: &str) -> usize {
    let listed = awa(url, &["job", "list", "--queue", queue, "--json"]).json();
    listed.as_array().expect("a list").len()
}

#[tokio::test]
async fn a_duplicate_exits_3_naming_the_existing_job() {
    let db = migrated_db().await;
    let url = db.url();
    let first = awa(url, &enqueue_args(r#"{"account": 1}"#, BY_ARGS)).json();
    assert_eq!(first["inserted"], 1);
    let holder = first["ids"][0].clone();

    // Same args written differently: a duplicate.
    let again = awa(url, &enqueue_args(r#"{ "account":1 }"#, BY_ARGS));
    assert_eq!(again.code, Some(3), "{again:#?}");
    again.refused(&format!("it duplicates job {holder}"));
    let refusal: serde_json::Value = serde_json::from_str(&again.stdout).expect("JSON");
    assert_eq!(refusal["held_by"], holder, "{refusal}");
    assert_eq!(
        refusal["unique"], "kind and args per 10m (kept after completed)",
        "{refusal}"
    );
    // Without --json: the same, said in text.
    let mut text_args = enqueue_args(r#"{"account": 1}"#, BY_ARGS);
    text_args.retain(|a| *a != "--json");
    let text = awa(url, &text_args);
    assert_eq!(text.code, Some(3), "{text:#?}");
    text.refused("unique by kind and args per 10m");

    // Other args, or only the kind with a field of the args: new jobs.
    let other = awa(url, &enqueue_args(r#"{"account": 2}"#, BY_ARGS)).json();
    assert_eq!(other["inserted"], 1);
    let by_field = [
        "--unique-by",
        "kind,args.tenant",
        "--unique-by",
        "queue",
        "--unique-states",
        "none",
    ];
    let t1 = awa(
        url,
        &enqueue_args(r#"{"tenant": "a", "page": 1}"#, &by_field),
    )
    .json();
    let t2 = awa(
        url,
        &enqueue_args(r#"{"tenant": "a", "page": 2}"#, &by_field),
    );
    assert_eq!(t2.code, Some(3), "{t2:#?}");
    t2.refused(&format!("it duplicates job {}", t1["ids"][0]));

    // --count copies are duplicates of the first, not a refusal.
    let mut copies = enqueue_args(r#"{"account": 3}"#, BY_ARGS);
    copies.extend(["--count", "5"]);
    let copies = awa(url, &copies).json();
    assert_eq!(copies["inserted"], 1, "{copies}");
    assert_eq!(copies["existing"].as_array().unwrap().len(), 1, "{copies}");
    assert_eq!(jobs_in(url, "refresh"), 4);
}

#[tokio::test]
async fn bad_unique_flags_are_refused_before_anything_is_written() {
    let db = migrated_db().await;
    let url = db.url();
    for (flags, says) in [
        (&["--unique-by", "argz"][..], "is not a key part"),
        (&["--unique-by", "args."][..], "is not a key part"),
        (&["--unique-period", "soon"][..], "is not a duration"),
        (&["--unique-period", "0s"][..], "--unique-period"),
        (&["--unique-period", "1500ms"][..], "whole seconds"),
        (&["--unique-period", "400days"][..], "--unique-period"),
        (
            &["--unique-period", "1h", "--unique-states", "running"][..],
            "unfinished jobs always hold",
        ),
        (
            &["--unique-period", "1h", "--unique-states", "bogus"][..],
            "unknown job state",
        ),
        (&["--unique-states", "completed"][..], "needs a period"),
    ] {
        let run: Run = awa(url, &enqueue_args("{}", flags));
        assert_ne!(run.code, Some(3), "{flags:?}: {run:#?}");
        run.refused(says);
    }
    // Refused before connecting: a database that does not answer is never
    // reached.
    let offline = common::awa_bare(&[
        "--database-url",
        "postgres://nobody@127.0.0.1:1/nothing",
        "job",
        "enqueue",
        "--queue",
        "q",
        "--kind",
        "k",
        "--unique-by",
        "argz",
    ]);
    offline.refused("is not a key part");
    assert_eq!(jobs_in(url, "refresh"), 0);
}

/// Sixteen `awa job enqueue` processes at once, each the same job with
/// `--unique-by args --unique-period 1h`: one job, one exit 0, and every
/// other process exits 3 naming it.
#[tokio::test]
async fn concurrent_processes_make_one_job_and_each_is_told_it() {
    const PROCESSES: usize = 16;
    let db = migrated_db().await;
    let url = db.url();
    let args = enqueue_args(
        r#"{"account": 42}"#,
        &["--unique-by", "args", "--unique-period", "1h"],
    );
    let running: Vec<_> = (0..PROCESSES).map(|_| spawn_awa(url, &args)).collect();
    let runs: Vec<Run> = running.into_iter().map(|r| r.finish()).collect();
    let ok: Vec<&Run> = runs.iter().filter(|r| r.ok()).collect();
    assert_eq!(ok.len(), 1, "exactly one process enqueued: {runs:#?}");
    let id = ok[0].json()["ids"][0].clone();
    for run in runs.iter().filter(|r| !r.ok()) {
        assert_eq!(run.code, Some(3), "{run:#?}");
        let refusal: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
        assert_eq!(refusal["held_by"], id, "{run:#?}");
    }
    assert_eq!(jobs_in(url, "refresh"), 1);
}
