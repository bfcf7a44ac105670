//! Connection URLs the CLI cannot use: refused with advice, and never with
//! the password in the output, whatever the verbosity or output format.
//! (A wrong password against a real server is in `tls.rs`, which has a
//! server with password authentication.)

use crate::common;

use common::{Run, assert_hidden, awa};

const SECRET: &str = "s3cretpw";

fn runs(url: &str, args: &[&str]) -> Vec<(String, Run)> {
    common::awa_every_way(url, args)
}

fn assert_secret_hidden(how: &str, run: &Run) {
    assert_hidden(SECRET, how, run);
}

#[test]
fn unreachable_server_never_shows_the_password() {
    // Port 1 on the loopback: refused at once, so the error is the driver's.
    for url in [
        "postgres://u:s3cretpw@127.0.0.1:1/db",
        "postgres://u@127.0.0.1:1/db?password=s3cretpw",
        "postgresql://u@127.0.0.1:1/db?sslmode=require&password=s3cretpw",
        "postgres://u:s3cret%70w@127.0.0.1:1/db",
    ] {
        for args in [&["queue", "stats"][..], &["migrate"][..]] {
            for (how, run) in runs(url, args) {
                run.refused("could not connect to PostgreSQL");
                assert_secret_hidden(&format!("{url} {args:?} {how}"), &run);
                assert!(
                    run.stderr.contains("127.0.0.1:1"),
                    "the message should still say where: {run:#?}"
                );
            }
        }
    }
}

#[test]
fn a_host_list_is_tried_in_order_and_named_without_the_password() {
    // Every listed host refuses: each is named with its reason.
    let url = "postgres://u:s3cretpw@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write";
    for args in [
        &["queue", "stats"][..],
        &["migrate"][..],
        &["worker", "run", "--queue", "q", "--handler", "noop"][..],
    ] {
        for (how, run) in runs(url, args) {
            run.refused(
                "could not connect to PostgreSQL at \
                 postgres://u:***@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write: \
                 no listed host gave a read-write session (target_session_attrs): 127.0.0.1:1: ",
            );
            assert!(run.stderr.contains("; 127.0.0.1:2: "), "{how}: {run:#?}");
            assert_secret_hidden(&format!("{args:?} {how}"), &run);
        }
    }
    // A value libpq does not know is refused before connecting.
    for (how, run) in runs(
        "postgres://u:s3cretpw@h1,h2/db?target_session_attrs=master",
        &["queue", "stats"],
    ) {
        run.refused("target_session_attrs=\"master\" is not one of any, read-write");
        assert_secret_hidden(&how, &run);
    }
}

#[tokio::test]
async fn a_dead_first_host_is_skipped() {
    let db = common::migrated_db().await;
    // The test database's URL with a host that refuses connections listed
    // before its own.
    let url = db.url();
    let authority = url.find("://").expect("a URL") + 3;
    let hosts = url[authority..]
        .find('/')
        .map_or(url.len(), |end| authority + end);
    let at = url[authority..hosts]
        .rfind('@')
        .map_or(authority, |i| authority + i + 1);
    let sep = if url.contains('?') { '&' } else { '?' };
    let listed = format!(
        "{}127.0.0.1:1,{}{sep}target_session_attrs=read-write",
        &url[..at],
        &url[at..]
    );
    let run = awa(&listed, &["--json", "queue", "stats"]);
    assert!(run.ok(), "{listed}: {run:#?}");
}

#[test]
fn json_error_is_json_without_the_password() {
    let run = awa(
        "postgres://u:s3cretpw@127.0.0.1:1/db",
        &["--json", "queue", "stats"],
    );
    let value: serde_json::Value =
        serde_json::from_str(&run.stdout).expect("--json prints the error as JSON");
    let message = value["error"].as_str().expect("an error message");
    assert!(
        message.contains("postgres://u:***@127.0.0.1:1/db"),
        "{message}"
    );
    assert_secret_hidden("--json", &run);
}

#[test]
fn other_schemes_are_refused_as_not_postgres() {
    for url in [
        "mysql://u:s3cretpw@127.0.0.1:3306/db",
        "http://u:s3cretpw@localhost/db",
        "s3cretpw",
        "localhost",
        "host=localhost password=s3cretpw",
        "postgres:/localhost/db",
    ] {
        for args in [
            &["queue", "stats"][..],
            &["migrate"][..],
            &["worker", "run", "--queue", "q", "--handler", "noop"][..],
        ] {
            for (how, run) in runs(url, args) {
                let how = format!("{url} {args:?} {how}");
                run.refused("not a postgres:// or postgresql:// URL");
                assert!(
                    run.stderr.contains("postgres://USER"),
                    "{how}: should say how to write it: {run:#?}"
                );
                assert!(
                    !run.stderr.to_lowercase().contains("could not connect")
                        && !run.stderr.contains("lookup"),
                    "{how}: refused before any connection attempt: {run:#?}"
                );
                assert_secret_hidden(&how, &run);
            }
        }
    }
}

#[test]
fn unreadable_postgres_url_is_refused_without_the_password() {
    for url in [
        "postgres://u:s3cretpw@127.0.0.1:notaport/db",
        "postgres://u:s3cretpw@127.0.0.1/db?sslmode=sometimes",
        "postgres://u@127.0.0.1:1/db?passwd=s3cretpw",
        "postgres://u@127.0.0.1:1/db?sslpassword=s3cretpw",
    ] {
        for (how, run) in runs(url, &["queue", "stats"]) {
            run.refused("invalid connection URL");
            assert_secret_hidden(&format!("{url} {how}"), &run);
        }
    }
}

#[test]
fn missing_root_certificate_is_named_before_connecting() {
    let url =
        "postgres://u:s3cretpw@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=/no/such/ca.pem";
    for (how, run) in runs(url, &["queue", "stats"]) {
        run.refused("cannot read the root certificate file \"/no/such/ca.pem\"");
        assert!(
            !run.stderr.contains("could not connect"),
            "{how}: refused before connecting: {run:#?}"
        );
        assert_secret_hidden(&how, &run);
    }
}
