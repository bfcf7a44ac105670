//! How the bench writes numbers: the one place every report, table and
//! label takes its formatting from (a leaf: it uses nothing of the bench).

/// An offered rate, as `200` or `1,000` (no decimals).
pub fn rate(r: u64) -> String {
    if r >= 1_000 {
        num(r as f64)
    } else {
        r.to_string()
    }
}

/// Rates as the scenarios announce them: `200, 1000`.
pub fn list(rates: &[u64]) -> String {
    rates
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a run's progress line says when its backlog was left after
/// `timeout`: nothing when it drained.
pub fn undrained(drained: bool, timeout: std::time::Duration) -> String {
    if drained {
        String::new()
    } else {
        format!("  (not drained after {:.0}s)", timeout.as_secs_f64())
    }
}

/// Readable numbers: thousands separators for big ones, decimals for small.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x.abs() >= 1000.0 {
        let s = format!("{:.0}", x.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if x < 0.0 { format!("-{out}") } else { out }
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.01 || x == 0.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.5}")
    }
}
