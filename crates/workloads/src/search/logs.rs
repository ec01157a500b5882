//! Web-server access-log documents of about 1.4 KB, shaped like those of
//! esrally's elastic/logs track (Filebeat's nginx module in ECS form: the
//! combined-log line as `message`, and its parts parsed into `source`,
//! `http`, `url` and `user_agent`, next to the agent and host that
//! shipped it), with http_logs' fields (`@timestamp`, client ip, request,
//! status, size) among them. Documents are in time order, 40 ms apart.

use super::mix::{cumulative, write_int, write_padded, Mix};

/// 2026-01-01T00:00:00Z, in milliseconds since the epoch.
const START_MS: u64 = 1_767_225_600_000;
const STEP_MS: u64 = 40;

const METHODS: &[(&str, u32)] = &[
    ("GET", 85),
    ("POST", 10),
    ("HEAD", 3),
    ("PUT", 1),
    ("DELETE", 1),
];

/// Statuses and their shares, as a busy site answers.
const STATUSES: &[(u16, u32)] = &[
    (200, 80),
    (304, 7),
    (404, 5),
    (301, 3),
    (302, 2),
    (500, 1),
    (403, 1),
    (503, 1),
];

const SECTIONS: &[&str] = &[
    "images",
    "products",
    "cart",
    "api/v1/orders",
    "api/v1/users",
    "static/css",
    "static/js",
    "blog",
    "search",
    "account",
    "docs",
    "downloads",
];
const FILES: &[&str] = &[
    "index.html",
    "logo.png",
    "main.js",
    "style.css",
    "list",
    "item",
    "checkout",
    "banner.jpg",
    "feed.xml",
    "report.pdf",
    "favicon.ico",
    "details",
];

const AGENTS: &[(&str, &str, &str, &str, &str)] = &[
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", "Chrome", "120.0.0.0", "Windows", "10"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "Safari", "17.1", "Mac OS X", "10.15.7"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0", "Firefox", "121.0", "Linux", ""),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1", "Mobile Safari", "17.1", "iOS", "17.1"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.43 Mobile Safari/537.36", "Chrome Mobile", "120.0.6099.43", "Android", "14"),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot", "2.1", "Other", ""),
    ("curl/8.4.0", "curl", "8.4.0", "Other", ""),
];

const REFERRERS: &[&str] = &[
    "-",
    "https://www.google.com/",
    "https://shop.example.com/",
    "https://www.bing.com/",
    "https://news.example.org/article",
    "https://shop.example.com/cart",
];

const COUNTRIES: &[(&str, &str, u32)] = &[
    ("US", "Ashburn", 40),
    ("DE", "Frankfurt am Main", 12),
    ("CN", "Beijing", 10),
    ("GB", "London", 8),
    ("FR", "Paris", 6),
    ("IN", "Mumbai", 6),
    ("BR", "Sao Paulo", 5),
    ("JP", "Tokyo", 5),
    ("NL", "Amsterdam", 4),
    ("SG", "Singapore", 4),
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The logs generator: its weighted tables, summed once.
#[derive(Debug, Clone)]
pub struct Logs {
    methods: Vec<u32>,
    statuses: Vec<u32>,
    countries: Vec<u32>,
}

impl Default for Logs {
    fn default() -> Self {
        Logs::new()
    }
}

/// One request's parts, drawn once and written twice (the log line and
/// its parsed fields).
struct Request {
    ip: [u8; 4],
    method: &'static str,
    section: &'static str,
    file: &'static str,
    item: u64,
    status: u16,
    bytes: u64,
    referrer: &'static str,
    agent: usize,
    country: usize,
    host: u64,
}

impl Logs {
    pub fn new() -> Logs {
        Logs {
            methods: cumulative(METHODS.iter().map(|m| m.1)),
            statuses: cumulative(STATUSES.iter().map(|s| s.1)),
            countries: cumulative(COUNTRIES.iter().map(|c| c.2)),
        }
    }

    pub fn mapping() -> &'static str {
        r#"{"properties":{"@timestamp":{"type":"date"},"message":{"type":"text"},"source":{"properties":{"ip":{"type":"ip"},"address":{"type":"keyword"},"geo":{"properties":{"country_iso_code":{"type":"keyword"},"city_name":{"type":"keyword"}}}}},"http":{"properties":{"version":{"type":"keyword"},"request":{"properties":{"method":{"type":"keyword"},"referrer":{"type":"keyword"}}},"response":{"properties":{"status_code":{"type":"integer"},"body":{"properties":{"bytes":{"type":"long"}}}}}}},"url":{"properties":{"original":{"type":"keyword"},"path":{"type":"keyword"},"extension":{"type":"keyword"}}},"user_agent":{"properties":{"original":{"type":"keyword"},"name":{"type":"keyword"},"version":{"type":"keyword"},"os":{"properties":{"name":{"type":"keyword"},"version":{"type":"keyword"}}}}},"log":{"properties":{"offset":{"type":"long"},"file":{"properties":{"path":{"type":"keyword"}}}}}}}"#
    }

    fn request(&self, mix: &mut Mix) -> Request {
        let ip = mix.next().to_le_bytes();
        Request {
            ip: [ip[0] % 223 + 1, ip[1], ip[2], ip[3]],
            method: METHODS[mix.weighted(&self.methods)].0,
            section: SECTIONS[mix.skewed(SECTIONS.len() as u64) as usize],
            file: FILES[mix.below(FILES.len() as u64) as usize],
            item: mix.skewed(100_000),
            status: STATUSES[mix.weighted(&self.statuses)].0,
            bytes: mix.skewed(200_000),
            referrer: REFERRERS[mix.below(REFERRERS.len() as u64) as usize],
            agent: mix.skewed(AGENTS.len() as u64) as usize,
            country: mix.weighted(&self.countries),
            host: mix.below(8) + 1,
        }
    }

    /// Writes document `n`'s source (one JSON object, no newline).
    #[inline]
    pub fn write(&self, seed: u64, n: u64, out: &mut Vec<u8>) {
        let mut mix = Mix::new(seed, n);
        let r = self.request(&mut mix);
        let ms = START_MS + n * STEP_MS + mix.below(STEP_MS);
        let (agent, ua_name, ua_version, os_name, os_version) = AGENTS[r.agent];
        let (country, city, _) = COUNTRIES[r.country];
        out.extend_from_slice(b"{\"@timestamp\":\"");
        write_time(out, ms, Format::Iso);
        out.extend_from_slice(b"\",\"message\":\"");
        write_ip(out, r.ip);
        out.extend_from_slice(b" - - [");
        write_time(out, ms, Format::Clf);
        out.extend_from_slice(b"] \\\"");
        write_request_line(out, &r);
        out.extend_from_slice(b"\\\" ");
        write_int(out, r.status);
        out.push(b' ');
        write_int(out, r.bytes);
        out.extend_from_slice(b" \\\"");
        out.extend_from_slice(r.referrer.as_bytes());
        out.extend_from_slice(b"\\\" \\\"");
        out.extend_from_slice(agent.as_bytes());
        out.extend_from_slice(
            b"\\\"\",\"agent\":{\"type\":\"filebeat\",\"version\":\"8.11.0\",\"hostname\":\"web-",
        );
        write_padded(out, r.host, 2);
        out.extend_from_slice(b"\",\"ephemeral_id\":\"");
        write_hex(out, seed ^ r.host, 16);
        out.extend_from_slice(b"\"},\"ecs\":{\"version\":\"8.0.0\"},\"event\":{\"dataset\":\"nginx.access\",\"module\":\"nginx\",\"category\":[\"web\"],\"type\":[\"access\"],\"outcome\":\"");
        out.extend_from_slice(if r.status < 400 {
            b"success"
        } else {
            b"failure"
        });
        out.extend_from_slice(b"\"},\"host\":{\"name\":\"web-");
        write_padded(out, r.host, 2);
        out.extend_from_slice(b"\",\"architecture\":\"x86_64\",\"os\":{\"family\":\"debian\",\"name\":\"Debian GNU/Linux\",\"version\":\"12 (bookworm)\",\"kernel\":\"6.1.0-18-amd64\"}},\"http\":{\"version\":\"1.1\",\"request\":{\"method\":\"");
        out.extend_from_slice(r.method.as_bytes());
        out.extend_from_slice(b"\",\"referrer\":\"");
        out.extend_from_slice(r.referrer.as_bytes());
        out.extend_from_slice(b"\"},\"response\":{\"status_code\":");
        write_int(out, r.status);
        out.extend_from_slice(b",\"body\":{\"bytes\":");
        write_int(out, r.bytes);
        out.extend_from_slice(b"}}},\"input\":{\"type\":\"log\"},\"log\":{\"file\":{\"path\":\"/var/log/nginx/access.log\"},\"offset\":");
        write_int(out, n * 211);
        out.extend_from_slice(b"},\"source\":{\"address\":\"");
        write_ip(out, r.ip);
        out.extend_from_slice(b"\",\"ip\":\"");
        write_ip(out, r.ip);
        out.extend_from_slice(b"\",\"geo\":{\"country_iso_code\":\"");
        out.extend_from_slice(country.as_bytes());
        out.extend_from_slice(b"\",\"city_name\":\"");
        out.extend_from_slice(city.as_bytes());
        out.extend_from_slice(b"\"}},\"url\":{\"original\":\"");
        write_path(out, &r);
        out.extend_from_slice(b"\",\"path\":\"");
        write_path(out, &r);
        out.extend_from_slice(b"\",\"extension\":\"");
        out.extend_from_slice(
            r.file
                .rsplit_once('.')
                .map_or("", |(_, ext)| ext)
                .as_bytes(),
        );
        out.extend_from_slice(b"\"},\"user_agent\":{\"original\":\"");
        out.extend_from_slice(agent.as_bytes());
        out.extend_from_slice(b"\",\"name\":\"");
        out.extend_from_slice(ua_name.as_bytes());
        out.extend_from_slice(b"\",\"version\":\"");
        out.extend_from_slice(ua_version.as_bytes());
        out.extend_from_slice(b"\",\"os\":{\"name\":\"");
        out.extend_from_slice(os_name.as_bytes());
        out.extend_from_slice(b"\",\"version\":\"");
        out.extend_from_slice(os_version.as_bytes());
        out.extend_from_slice(b"\"},\"device\":{\"name\":\"Other\"}}}");
    }

    /// The value of `field` that document `n` (made with `seed`) holds
    /// (see [`super::geonames::Geonames::value`]).
    pub(crate) fn value(
        &self,
        field: &str,
        (seed, n): (u64, u64),
        _pick: &mut Mix,
        out: &mut Vec<u8>,
    ) -> bool {
        let r = self.request(&mut Mix::new(seed, n));
        match field {
            "http.response.status_code" => write_int(out, r.status),
            "http.request.method" => out.extend_from_slice(r.method.as_bytes()),
            "source.geo.country_iso_code" => {
                out.extend_from_slice(COUNTRIES[r.country].0.as_bytes())
            }
            // One word of the log line, for `match`.
            "message.word" => {
                out.extend_from_slice(r.section.split('/').next().unwrap_or_default().as_bytes())
            }
            // A method and the path's first part, as the log line holds
            // them (`GET /images`), for `match_phrase`: the whole path is
            // too rare to be in a small index.
            "message.request" => {
                out.extend_from_slice(r.method.as_bytes());
                out.extend_from_slice(b" /");
                out.extend_from_slice(r.section.as_bytes());
            }
            "http.response.body.bytes" => write_int(out, r.bytes),
            _ => return false,
        }
        true
    }
}

/// Fields [`Logs::value`] gives values of.
pub const VALUE_FIELDS: &[&str] = &[
    "http.response.status_code",
    "http.request.method",
    "source.geo.country_iso_code",
    "message.word",
    "message.request",
    "http.response.body.bytes",
];

fn write_request_line(out: &mut Vec<u8>, r: &Request) {
    out.extend_from_slice(r.method.as_bytes());
    out.push(b' ');
    write_path(out, r);
    out.extend_from_slice(b" HTTP/1.1");
}

fn write_path(out: &mut Vec<u8>, r: &Request) {
    out.push(b'/');
    out.extend_from_slice(r.section.as_bytes());
    out.push(b'/');
    write_int(out, r.item);
    out.push(b'/');
    out.extend_from_slice(r.file.as_bytes());
}

fn write_ip(out: &mut Vec<u8>, ip: [u8; 4]) {
    for (i, octet) in ip.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        write_int(out, *octet);
    }
}

fn write_hex(out: &mut Vec<u8>, n: u64, digits: u32) {
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4) & 0xf) as usize]);
    }
}

enum Format {
    /// `2026-01-01T00:00:00.040Z`
    Iso,
    /// `01/Jan/2026:00:00:00 +0000`, as a combined log line writes it.
    Clf,
}

/// Writes the UTC time `ms` after the epoch.
fn write_time(out: &mut Vec<u8>, ms: u64, format: Format) {
    let (days, rem) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    match format {
        Format::Iso => {
            write_int(out, year);
            out.push(b'-');
            write_padded(out, month, 2);
            out.push(b'-');
            write_padded(out, day, 2);
            out.push(b'T');
        }
        Format::Clf => {
            write_padded(out, day, 2);
            out.push(b'/');
            out.extend_from_slice(MONTHS[month as usize - 1].as_bytes());
            out.push(b'/');
            write_int(out, year);
            out.push(b':');
        }
    }
    write_padded(out, h, 2);
    out.push(b':');
    write_padded(out, m, 2);
    out.push(b':');
    write_padded(out, s, 2);
    match format {
        Format::Iso => {
            out.push(b'.');
            write_padded(out, milli, 3);
            out.push(b'Z');
        }
        Format::Clf => out.extend_from_slice(b" +0000"),
    }
}

/// Year, month and day of `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for dates after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_in_both_forms() {
        let mut out = Vec::new();
        // 2026-02-28T23:59:59.007Z
        let ms = START_MS + (58 * 86_400 + 86_399) * 1000 + 7;
        write_time(&mut out, ms, Format::Iso);
        out.push(b' ');
        write_time(&mut out, START_MS, Format::Clf);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "2026-02-28T23:59:59.007Z 01/Jan/2026:00:00:00 +0000"
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
