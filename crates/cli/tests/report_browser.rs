//! The HTML report as a person sees it: real result files (a rate-limited
//! run and a sweep against the in-process `sim://` server) rendered by
//! `loadcell report --html`, then loaded in headless Chromium (Debian's
//! `chromium`), whose parsed DOM and screenshot are checked; and the run
//! history's trend page the same way.

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use common::*;

/// The tests take turns: each one's runs are on the in-process server, and
/// the other's load would change what they show (the bottleneck hint).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn file_url(page: &Path) -> String {
    format!("file://{}", page.display())
}

/// Opening and closing tags of element `name` in `html`.
fn tags(html: &str, name: &str) -> (usize, usize) {
    let open = format!("<{name}");
    let opens = html
        .match_indices(&open)
        .filter(|(i, _)| matches!(html.as_bytes().get(i + open.len()), Some(b' ' | b'>')))
        .count();
    (opens, html.matches(&format!("</{name}>")).count())
}

/// Every element of `names` is balanced in the page as written, and
/// Chromium's DOM holds exactly those elements: the parser had nothing to
/// repair (stray or missing end tags, a block inside <p>).
fn assert_parsed_as_written(html: &str, dom: &str, names: &[&str]) {
    for name in names {
        let (opens, closes) = tags(html, name);
        assert_eq!(opens, closes, "<{name}>: {opens} opened, {closes} closed");
        assert_eq!(
            tags(dom, name),
            (opens, closes),
            "<{name}> elements changed when Chromium parsed the page"
        );
    }
}

/// A 1280 × `height` screenshot of `page` is a PNG of more than
/// `min_bytes`: a blank page compresses to a few kilobytes, charts and
/// tables do not.
fn assert_not_blank(page: &Path, height: u32, min_bytes: usize) {
    let shot = page.with_extension("png");
    chromium(
        &file_url(page),
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size=1280,{height}"),
        ],
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > min_bytes,
        "the screenshot is nearly blank: {} bytes",
        png.len()
    );
}

#[test]
fn the_report_renders_in_chromium_with_every_section() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(loadcell(
        d,
        &[
            "run",
            "kv",
            "--target",
            // A server that answers at once: the client's CPU is the
            // bottleneck, so the report has a hint to show.
            "sim://?latency=fixed:0ms",
            "--clients",
            "16",
            "--time",
            "3s",
            "--report-interval",
            "500ms",
            "--label",
            "instance=demo",
            "--out",
            "run.json",
        ],
    ));
    ok(loadcell(
        d,
        &[
            "sweep",
            "kv",
            "--target",
            "sim://?latency=fixed:1ms&concurrency=4",
            "--clients",
            "1,2,4,8,16",
            "--time",
            "1s",
            "--out",
            "sweep.json",
        ],
    ));
    ok(loadcell(
        d,
        &["report", "run.json", "sweep.json", "--html", "report.html"],
    ));
    let page = d.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("http://") && !html.contains("https://"),
        "the report is self-contained: no scripts, nothing fetched"
    );

    let dom = chromium(&file_url(&page), &["--dump-dom"]);
    assert!(dom.trim_end().ends_with("</html>"), "the page did not load");
    // No scripts, so no script errors.
    assert!(!dom.contains("<script"), "a script in the DOM");
    assert_parsed_as_written(
        &html,
        &dom,
        &[
            "section",
            "div",
            "p",
            "table",
            "thead",
            "tr",
            "th",
            "td",
            "dl",
            "dt",
            "dd",
            "ul",
            "li",
            "figure",
            "figcaption",
            "pre",
            "h2",
            "h3",
            "svg",
        ],
    );
    let summary = &dom[dom.find("id=\"summary\"").expect("a summary section")..];
    assert!(
        summary[..summary.find("</section>").unwrap()].contains("<table"),
        "the summary has no table"
    );
    for part in [
        "Throughput over time",
        "Latency over time",
        "Latency percentile spectrum",
        "Resources",
        "Bottleneck hint",
        "Environment and configuration",
        "instance=demo",
        "sweep of clients",
        "Throughput by clients",
        "Latency against throughput",
        "knee: clients",
        "throughput saturates at",
    ] {
        assert!(dom.contains(part), "the rendered page has no '{part}'");
    }
    let charts = dom.matches("<svg").count();
    assert!(charts >= 10, "only {charts} charts rendered");

    assert_not_blank(&page, 2400, 50_000);
}

#[test]
fn the_trend_page_renders_in_chromium_with_its_change_marked() {
    let _alone = alone();
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let run = |target: &str, commit: &str| run_kv_at_commit(d, target, "400ms", commit, &[]);
    for i in 0..6 {
        run("sim://?latency=fixed:1ms", &format!("a{i}"));
    }
    for i in 0..6 {
        run("sim://?latency=fixed:1400us", &format!("b{i}"));
    }
    // A flagged run, whatever the machine's load: the last run's file,
    // marked partial, a millisecond later, imported.
    let newest = std::fs::read_dir(d.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .max_by_key(|p| read_json(p)["started_at"].as_str().unwrap().to_string())
        .unwrap();
    let mut partial = read_json(&newest);
    let at = partial["started_at"].as_str().unwrap().replace("Z", "1Z");
    partial["started_at"] = at.into();
    partial["status"] = "partial".into();
    partial["labels"]["commit"] = "cut-short".into();
    std::fs::create_dir(d.join("partial")).unwrap();
    std::fs::write(d.join("partial/r.json"), partial.to_string()).unwrap();
    ok(loadcell(
        d,
        &["history", "import", "partial", "--history", "results"],
    ));
    let page = d.join("trend.html");
    ok(loadcell(d, &["trend", "--html", page.to_str().unwrap()]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("http://") && !html.contains("https://"),
        "the page is self-contained"
    );

    let dom = chromium(&file_url(&page), &["--dump-dom"]);
    assert!(dom.trim_end().ends_with("</html>"), "the page did not load");
    assert_parsed_as_written(
        &html,
        &dom,
        &[
            "section", "p", "table", "tr", "th", "td", "figure", "h2", "svg", "title",
        ],
    );
    for part in [
        "loadcell trend",
        "workload=kv",
        "throughput over the series' runs",
        "latency_p50 over the series' runs",
        "noise band",
        "regression",
        // Labels on hover: each point's title, the flagged one's reason.
        "commit b0",
        "commit cut-short, flagged: partial",
    ] {
        assert!(dom.contains(part), "the rendered page has no '{part}'");
    }
    let charts = dom.matches("<svg").count();
    assert!(charts >= 5, "only {charts} charts rendered");

    assert_not_blank(&page, 2000, 30_000);
}
