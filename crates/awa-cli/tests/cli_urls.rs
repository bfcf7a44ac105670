//! Connection URLs the CLI cannot use: refused with advice, and never with
//! the password in the output, whatever the verbosity or output format.
//! (A wrong password against a real server is in `cli_tls.rs`, which has a
//! server with password authentication.)

mod common;

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
