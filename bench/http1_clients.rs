//! hyper 1's `client::conn::http1` against loadcell's own HTTP/1.1 client
//! (the `http` driver), in one harness: THREADS threads, each a
//! current-thread runtime with CONNS keep-alive connections sending GET
//! URL back to back for SECS seconds. Prints one JSON line: requests,
//! process CPU seconds (user + sys, from getrusage) and wall seconds, so
//! the client CPU per request of the two can be compared on the same
//! server. bench/http.sh alternates runs of both.
//!
//!   cargo run --release -p loadcell-drivers --example http1_clients -- \
//!       loadcell|hyper http://127.0.0.1:PORT/index.html THREADS CONNS SECS

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use loadcell_core::http::{HttpConn, Request};
use loadcell_core::{Driver, Target};
use loadcell_drivers::http::HttpDriver;
use tokio::net::TcpStream;

#[derive(Clone, Copy, PartialEq)]
enum Client {
    Loadcell,
    Hyper,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Requests one connection completes before `deadline`.
async fn loadcell_connection(driver: Rc<HttpDriver>, deadline: Instant) -> u64 {
    let mut conn = driver.connect().await.expect("connects");
    let request = Request {
        method: "GET",
        path: b"",
        headers: b"",
        body: b"",
    };
    let mut n = 0;
    while Instant::now() < deadline {
        let r = conn.request(&request).await.expect("a response");
        assert_eq!(r.status, 200);
        n += 1;
    }
    n
}

async fn hyper_connection(url: Arc<hyper::Uri>, deadline: Instant) -> u64 {
    let authority = url.authority().expect("a host").clone();
    let tcp = TcpStream::connect(authority.as_str())
        .await
        .expect("connects");
    tcp.set_nodelay(true).expect("nodelay");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("handshake");
    tokio::task::spawn_local(connection);
    let mut n = 0;
    while Instant::now() < deadline {
        let request = hyper::Request::get(url.path())
            .header(hyper::header::HOST, authority.as_str())
            .body(Empty::<Bytes>::new())
            .expect("a valid request");
        let response = sender.send_request(request).await.expect("a response");
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.expect("the body");
        n += 1;
    }
    n
}

fn thread(client: Client, url: String, conns: usize, secs: f64) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    tokio::task::LocalSet::new().block_on(&runtime, async move {
        let mut tasks = tokio::task::JoinSet::new();
        match client {
            Client::Loadcell => {
                let target = Target::parse(&url).expect("a URL");
                let driver = Rc::new(HttpDriver::from_target(&target).expect("an HTTP target"));
                for _ in 0..conns {
                    tasks.spawn_local(loadcell_connection(Rc::clone(&driver), deadline));
                }
            }
            Client::Hyper => {
                let uri = Arc::new(url.parse::<hyper::Uri>().expect("a URI"));
                for _ in 0..conns {
                    tasks.spawn_local(hyper_connection(Arc::clone(&uri), deadline));
                }
            }
        }
        let mut total = 0;
        while let Some(n) = tasks.join_next().await {
            total += n.expect("a connection's task ends");
        }
        total
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [client, url, threads, conns, secs] = args.as_slice() else {
        eprintln!("usage: http1_clients loadcell|hyper URL THREADS CONNS SECS");
        std::process::exit(2);
    };
    let client = match client.as_str() {
        "loadcell" => Client::Loadcell,
        "hyper" => Client::Hyper,
        other => panic!("unknown client '{other}'"),
    };
    let threads: usize = threads.parse().expect("THREADS");
    let conns: usize = conns.parse().expect("CONNS");
    let secs: f64 = secs.parse().expect("SECS");
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || thread(client, url, conns, secs))
        })
        .collect();
    let requests: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("a thread"))
        .sum();
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    println!(
        r#"{{"client":"{}","requests":{requests},"cpu_s":{cpu:.4},"wall_s":{wall:.4},"cpu_us_per_request":{:.3},"requests_per_s":{:.0}}}"#,
        args[0],
        cpu * 1e6 / requests as f64,
        requests as f64 / wall
    );
}
