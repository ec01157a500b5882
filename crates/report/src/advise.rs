//! `loadcell advise`'s text: each finding with what to change, why, and the
//! numbers read; then the rules that passed and those that could not be
//! checked.

use std::fmt::Write;

use loadcell_analysis::advise::Advice;

/// The advice under a heading naming what was read (`about`: the server
/// and target, and the run when one was given).
pub fn text(about: &str, advice: &Advice) -> String {
    let mut out = format!("advise: {about}\n\n");
    if advice.findings.is_empty() {
        out.push_str("no findings\n\n");
    }
    for (n, f) in advice.findings.iter().enumerate() {
        let _ = writeln!(out, "{}. {} — {}", n + 1, f.rule, f.applies_to);
        let _ = writeln!(out, "   change:   {}", f.change);
        let _ = writeln!(out, "   why:      {}", f.why);
        let _ = writeln!(out, "   evidence: {}", f.evidence.join("; "));
        out.push('\n');
    }
    let passed = if advice.passed.is_empty() {
        "none".to_string()
    } else {
        advice.passed.join(", ")
    };
    let _ = writeln!(out, "checked and passed: {passed}");
    for n in &advice.not_checked {
        let _ = writeln!(out, "not checked: {} ({})", n.rule, n.why);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadcell_analysis::advise::{Finding, NotChecked, Server};

    #[test]
    fn findings_then_passed_then_not_checked() {
        let advice = Advice {
            server: Server::MariaDb,
            findings: vec![Finding {
                rule: "back_log",
                applies_to: "MySQL and MariaDB (a restart)",
                change: "raise back_log to at least 16".into(),
                why: "queue",
                evidence: vec!["back_log = 8".into(), "Aborted_connects = 3".into()],
            }],
            passed: vec!["query_cache", "tmp_table_size"],
            not_checked: vec![NotChecked {
                rule: "innodb_autoinc_lock_mode",
                why: "needs a run".into(),
            }],
        };
        assert_eq!(
            text("MariaDB 10.11 at mysql://lc:***@h/db", &advice),
            "advise: MariaDB 10.11 at mysql://lc:***@h/db\n\n\
             1. back_log — MySQL and MariaDB (a restart)\n   \
             change:   raise back_log to at least 16\n   \
             why:      queue\n   \
             evidence: back_log = 8; Aborted_connects = 3\n\n\
             checked and passed: query_cache, tmp_table_size\n\
             not checked: innodb_autoinc_lock_mode (needs a run)\n"
        );
    }
}
