//! `--server-metrics URL`: Prometheus exporters on the server's host
//! scraped every interval on a thread of their own, through the HTTP
//! family's client, into [`Readings`] that the engine's resource samples
//! take. A URL that is wrong at the start stops the run before any load;
//! a scrape that fails later is counted and named in the result.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use loadcell_core::http::{HttpConn, Request, Response};
use loadcell_core::{Driver, Target};
use loadcell_drivers::http::HttpDriver;
use loadcell_record::remote::{Readings, ReadingsWriter, RemoteSample, Scraped};

/// How long one scrape may take before it counts as failed.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// One URL: its driver, its host for labels, and its previous scrape.
struct Source {
    url: String,
    driver: HttpDriver,
    scraped: Scraped,
}

/// Checks every URL with a first scrape (which rates start from), then
/// scrapes them every `interval` until the readings are dropped.
pub fn start(urls: &[String], interval: Duration) -> anyhow::Result<Option<Readings>> {
    if urls.is_empty() {
        return Ok(None);
    }
    let mut sources = Vec::new();
    for url in urls {
        let bad = |why: String| anyhow!("--server-metrics {url}: {why}");
        let target = Target::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(target.scheme(), "http" | "https") {
            return Err(bad(
                "scrape over http:// or https://, e.g. http://db1:9100/metrics".to_string(),
            ));
        }
        let host = match target.hosts().first() {
            Some((host, Some(port))) => format!("{host}:{port}"),
            Some((host, None)) => host.clone(),
            None => return Err(bad("no host in the URL".to_string())),
        };
        sources.push(Source {
            url: target.redacted(),
            driver: HttpDriver::from_target(&target).map_err(bad)?,
            scraped: Scraped::new(&host),
        });
    }
    let named: Vec<(String, String)> = sources
        .iter()
        .map(|s| (s.url.clone(), s.scraped.host().to_string()))
        .collect();
    let (readings, writer) = Readings::new(&named);
    let (checked_tx, checked) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("loadcell-scrape".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = checked_tx.send(Err(anyhow!("cannot start the scraper: {e}")));
                    return;
                }
            };
            runtime.block_on(scrape_all(sources, interval, writer, checked_tx));
        })?;
    checked
        .recv()
        .map_err(|_| anyhow!("the scraper stopped before its first scrape"))??;
    Ok(Some(readings))
}

async fn scrape_all(
    mut sources: Vec<Source>,
    interval: Duration,
    writer: ReadingsWriter,
    checked: std::sync::mpsc::Sender<anyhow::Result<()>>,
) {
    for s in &mut sources {
        if let Err(e) = scrape(s).await {
            let _ = checked.send(Err(anyhow!("--server-metrics {}: {e}", s.url)));
            return;
        }
    }
    let _ = checked.send(Ok(()));
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        for (i, s) in sources.iter_mut().enumerate() {
            let scraped = scrape(s).await;
            if !writer.put(i, scraped) {
                return;
            }
        }
    }
}

/// One scrape on a connection of its own (an exporter closes idle ones
/// sooner than a long interval).
async fn scrape(source: &mut Source) -> Result<RemoteSample, String> {
    let fetch = async {
        let mut conn = source.driver.connect().await.map_err(|e| e.to_string())?;
        let request = Request {
            method: "GET",
            path: b"",
            headers: b"Accept: text/plain\r\nConnection: close\r\n",
            body: b"",
        };
        let Response { status, body } = conn.request(&request).await.map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("answered HTTP {status}"));
        }
        Ok(String::from_utf8_lossy(body).into_owned())
    };
    let text = tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("no answer within {}s", SCRAPE_TIMEOUT.as_secs()))??;
    source.scraped.read(&text, Instant::now())
}
