//! The trace context a job carries in its metadata: the member
//! [`METADATA_KEY`] holding the producer's W3C `traceparent` and
//! `tracestate`, checked by the rules the SQL producer applies
//! (`fn_enqueue_routed.sql`), so a refusal comes before any connection.

use crate::InvalidInput;

/// The metadata member that carries a job's trace context.
pub const METADATA_KEY: &str = "awa_trace";

/// The longest tracestate accepted (W3C asks propagators to keep at
/// least 512 characters).
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// The member for `traceparent` (version 00, lower-case hex, ids not all
/// zero) and an optional `tracestate` (at most 512 bytes; empty is none).
pub fn member(
    traceparent: &str,
    tracestate: Option<&str>,
) -> Result<serde_json::Value, InvalidInput> {
    let bad = |why: &str| InvalidInput::Name {
        what: "traceparent",
        value: traceparent.chars().take(80).collect(),
        why: format!("{why}; send 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"),
    };
    let parts: Vec<&str> = traceparent.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    match parts.as_slice() {
        ["00", trace, span, flags] if hex(trace, 32) && hex(span, 16) && hex(flags, 2) => {
            if trace.bytes().all(|b| b == b'0') || span.bytes().all(|b| b == b'0') {
                return Err(bad("its trace id or span id is all zeros"));
            }
        }
        _ => return Err(bad("not a W3C trace context of version 00 in lower case")),
    }
    let mut out = serde_json::Map::new();
    out.insert("traceparent".into(), traceparent.into());
    if let Some(state) = tracestate.filter(|s| !s.is_empty()) {
        if state.len() > MAX_TRACESTATE_BYTES {
            return Err(InvalidInput::TooLarge {
                what: "tracestate",
                bytes: state.len(),
                limit: MAX_TRACESTATE_BYTES,
            });
        }
        out.insert("tracestate".into(), state.into());
    }
    Ok(serde_json::Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_producers_rules() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert_eq!(
            member(tp, Some("k=v")).unwrap(),
            serde_json::json!({ "traceparent": tp, "tracestate": "k=v" })
        );
        assert_eq!(
            member(tp, Some("")).unwrap(),
            serde_json::json!({ "traceparent": tp })
        );
        assert!(member(tp, Some(&"x".repeat(512))).is_ok());
        assert!(member(tp, Some(&"x".repeat(513))).is_err());
        for bad in [
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "",
        ] {
            assert!(member(bad, None).is_err(), "{bad}");
        }
    }
}
