//! The `kv` workload, compatible with memtier_benchmark's options: a
//! SET:GET ratio (or weighted command templates), key patterns per side,
//! fixed, ranged or weighted value sizes, and pipelining. Generic over
//! [`KvConn`], so it runs on every key-value driver.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::family::KvFamily;
use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Value};

use crate::distribution::{Distribution, RandParams, RandType};
use crate::prepare::load::load_in_parallel;
use crate::prepare::PrepareObserver;
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};

/// How keys are chosen (memtier's `--key-pattern` letters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPattern {
    /// R: uniform random over the range.
    Random,
    /// S: each session walks the whole range in order, wrapping.
    Sequential,
    /// G: normal around `--key-median` with `--key-stddev`, clamped.
    Gaussian,
    /// P: the range is split between sessions; each walks its own part.
    Parallel,
    /// Z: Zipf's law with `--key-zipf-exp`, rank 1 at `--key-minimum`.
    Zipfian,
}

impl KeyPattern {
    fn parse(c: &str) -> Result<KeyPattern, String> {
        Ok(match c {
            "R" => KeyPattern::Random,
            "S" => KeyPattern::Sequential,
            "G" => KeyPattern::Gaussian,
            "P" => KeyPattern::Parallel,
            "Z" => KeyPattern::Zipfian,
            other => {
                return Err(format!(
                    "unknown key pattern '{other}': use R (random), S (sequential), G (gaussian), P (parallel) or Z (zipfian)"
                ))
            }
        })
    }

    fn letter(self) -> &'static str {
        match self {
            KeyPattern::Random => "R",
            KeyPattern::Sequential => "S",
            KeyPattern::Gaussian => "G",
            KeyPattern::Parallel => "P",
            KeyPattern::Zipfian => "Z",
        }
    }

    /// Parses memtier's `SET:GET` form, e.g. `R:R` or `S:G`.
    pub fn parse_pair(s: &str) -> Result<(KeyPattern, KeyPattern), String> {
        match s.split_once(':') {
            Some((a, b)) => Ok((KeyPattern::parse(a)?, KeyPattern::parse(b)?)),
            None => Err(format!(
                "--key-pattern '{s}' must be SET:GET, e.g. R:R or S:G"
            )),
        }
    }
}

/// Value sizes: `-d N`, `--data-size-range MIN-MAX`, or
/// `--data-size-list SIZE:WEIGHT,...`.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSize {
    Fixed(usize),
    Range(usize, usize),
    List(Vec<(usize, u32)>),
}

impl DataSize {
    pub fn parse_range(s: &str) -> Result<DataSize, String> {
        let bad = || format!("--data-size-range '{s}' must be MIN-MAX, e.g. 32-1024");
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let (a, b): (usize, usize) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a == 0 || a > b {
            return Err(format!(
                "--data-size-range '{s}': sizes must be at least 1 and MIN <= MAX"
            ));
        }
        Ok(DataSize::Range(a, b))
    }

    pub fn parse_list(s: &str) -> Result<DataSize, String> {
        let bad =
            || format!("--data-size-list '{s}' must be SIZE:WEIGHT,..., e.g. 32:7,1000:2,2000:1");
        let mut list = Vec::new();
        for item in s.split(',') {
            let (size, weight) = item.split_once(':').ok_or_else(bad)?;
            let size: usize = size.trim().parse().map_err(|_| bad())?;
            let weight: u32 = weight.trim().parse().map_err(|_| bad())?;
            if size == 0 {
                return Err(format!(
                    "--data-size-list '{s}': a value size of 0 is not allowed"
                ));
            }
            if weight > 0 {
                list.push((size, weight));
            }
        }
        if list.is_empty() {
            return Err(format!("--data-size-list '{s}': every weight is 0"));
        }
        Ok(DataSize::List(list))
    }

    pub fn max(&self) -> usize {
        match self {
            DataSize::Fixed(n) => *n,
            DataSize::Range(_, b) => *b,
            DataSize::List(l) => l.iter().map(|(s, _)| *s).max().unwrap_or(0),
        }
    }

    /// A size drawn from `r` (uniform in [0, 1)).
    pub(crate) fn pick(&self, r: f64) -> usize {
        match self {
            DataSize::Fixed(n) => *n,
            DataSize::Range(a, b) => a + ((b - a + 1) as f64 * r) as usize,
            DataSize::List(l) => {
                let total: u32 = l.iter().map(|(_, w)| w).sum();
                let mut target = (r * total as f64) as u32;
                for (size, w) in l {
                    if target < *w {
                        return *size;
                    }
                    target -= w;
                }
                l[l.len() - 1].0
            }
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            DataSize::Fixed(n) => n.to_string(),
            DataSize::Range(a, b) => format!("{a}-{b}"),
            DataSize::List(l) => l
                .iter()
                .map(|(s, w)| format!("{s}:{w}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    Literal(Vec<u8>),
    Key,
    Data,
}

/// A command's words: split on spaces and tabs, `"..."` quoting one with
/// spaces (or an empty one).
pub(crate) fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut had_quote = false;
    for ch in text.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                had_quote = true;
            }
            ' ' | '\t' if !quoted => {
                if !cur.is_empty() || had_quote {
                    words.push(std::mem::take(&mut cur));
                }
                had_quote = false;
            }
            c => cur.push(c),
        }
    }
    if quoted {
        return Err(format!("'{text}': unbalanced double quote"));
    }
    if !cur.is_empty() || had_quote {
        words.push(cur);
    }
    Ok(words)
}

/// A command template such as `hset __key__ f1 __data__`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandTemplate {
    pub text: String,
    args: Vec<Arg>,
    pub weight: u32,
    pub pattern: KeyPattern,
}

/// The words a --command may have: an event builds each command's
/// arguments in a fixed array, so that it allocates nothing.
pub const MAX_COMMAND_WORDS: usize = 16;

impl CommandTemplate {
    /// Parses a template: words split on spaces, `"..."` quoting allowed,
    /// `__key__` and `__data__` as placeholders.
    pub fn parse(text: &str, weight: u32, pattern: KeyPattern) -> Result<CommandTemplate, String> {
        let words = split_words(text).map_err(|e| format!("--command {e}"))?;
        if words.is_empty() {
            return Err("--command is empty: give a command such as 'set __key__ __data__'".into());
        }
        if words.len() > MAX_COMMAND_WORDS {
            return Err(format!(
                "--command '{text}' has {} words; at most {MAX_COMMAND_WORDS} are supported",
                words.len()
            ));
        }
        let args = words
            .into_iter()
            .map(|w| match w.as_str() {
                "__key__" => Ok(Arg::Key),
                "__data__" => Ok(Arg::Data),
                _ if w.starts_with("__") && w.ends_with("__") && w.len() > 4 => Err(format!(
                    "--command '{text}': unknown placeholder '{w}'; use __key__ or __data__"
                )),
                _ => Ok(Arg::Literal(w.into_bytes())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !matches!(args[0], Arg::Literal(_)) {
            return Err(format!(
                "--command '{text}': the first word must be the command name"
            ));
        }
        Ok(CommandTemplate {
            text: text.to_string(),
            args,
            weight,
            pattern,
        })
    }

    fn name(&self) -> String {
        match &self.args[0] {
            Arg::Literal(n) => String::from_utf8_lossy(n).to_ascii_lowercase(),
            _ => unreachable!("checked in parse"),
        }
    }

    fn uses_key(&self) -> bool {
        self.args.contains(&Arg::Key)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct KvOptions {
    pub ratio_set: u32,
    pub ratio_get: u32,
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    pub pattern_set: KeyPattern,
    pub pattern_get: KeyPattern,
    pub key_median: Option<f64>,
    pub key_stddev: Option<f64>,
    pub key_zipf_exp: f64,
    pub data_size: DataSize,
    pub random_data: bool,
    pub distinct_client_seed: bool,
    pub pipeline: usize,
    pub commands: Vec<CommandTemplate>,
    /// Values are derived from their key, and every GET hit is checked.
    pub verify: bool,
}

impl Default for KvOptions {
    /// memtier_benchmark's defaults.
    fn default() -> Self {
        KvOptions {
            ratio_set: 1,
            ratio_get: 10,
            key_prefix: "memtier-".into(),
            key_min: 0,
            key_max: 10_000_000,
            pattern_set: KeyPattern::Random,
            pattern_get: KeyPattern::Random,
            key_median: None,
            key_stddev: None,
            key_zipf_exp: 1.0,
            data_size: DataSize::Fixed(32),
            random_data: false,
            distinct_client_seed: false,
            pipeline: 1,
            commands: Vec::new(),
            verify: false,
        }
    }
}

impl KvOptions {
    /// Whether the workload sends arbitrary commands (a capability).
    pub fn needs_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// A session's random generator: seeded per session with
    /// `--distinct-client-seed`, otherwise the run's seed for every session,
    /// as memtier does.
    pub(crate) fn session_rng(&self, info: &SessionInfo) -> SmallRng {
        SmallRng::seed_from_u64(if self.distinct_client_seed {
            info.seed
        } else {
            info.run_seed
        })
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.commands.is_empty() && self.ratio_set == 0 && self.ratio_get == 0 {
            return Err(
                "--ratio 0:0 sends nothing: give at least one side a weight, e.g. 1:10".into(),
            );
        }
        if self.key_min > self.key_max {
            return Err(format!(
                "--key-minimum {} is greater than --key-maximum {}",
                self.key_min, self.key_max
            ));
        }
        if self.data_size.max() == 0 {
            return Err("a value size of 0 is not allowed: use -d 1 or more".into());
        }
        if self.pipeline == 0 {
            return Err("--pipeline must be at least 1".into());
        }
        if !(self.key_zipf_exp > 0.0 && self.key_zipf_exp <= 5.0) {
            return Err("--key-zipf-exp must be greater than 0 and at most 5".into());
        }
        if self.key_stddev.is_some_and(|s| s <= 0.0) {
            return Err("--key-stddev must be greater than 0".into());
        }
        if !self.commands.is_empty() && self.commands.iter().all(|c| c.weight == 0) {
            return Err("every --command has weight 0".into());
        }
        Ok(())
    }

    pub fn to_map(&self) -> std::collections::BTreeMap<String, Value> {
        let v = json!({
            "ratio": format!("{}:{}", self.ratio_set, self.ratio_get),
            "key_prefix": self.key_prefix,
            "key_minimum": self.key_min,
            "key_maximum": self.key_max,
            "key_pattern": format!("{}:{}", self.pattern_set.letter(), self.pattern_get.letter()),
            "key_median": self.key_median,
            "key_stddev": self.key_stddev,
            "key_zipf_exp": self.key_zipf_exp,
            "data_size": self.data_size.describe(),
            "random_data": self.random_data,
            "distinct_client_seed": self.distinct_client_seed,
            "pipeline": self.pipeline,
            "commands": self.commands.iter().map(|c| json!({
                "command": c.text, "weight": c.weight, "key_pattern": c.pattern.letter()
            })).collect::<Vec<_>>(),
            "verify": self.verify,
        });
        serde_json::from_value(v).expect("an object")
    }
}

const SET: usize = 0;
const GET: usize = 1;

/// The `kv` workload, shared by all sessions.
pub struct Kv {
    opts: KvOptions,
    ops: Vec<OpSpec>,
    zipf: Option<Distribution>,
}

impl Kv {
    pub fn new(opts: KvOptions) -> Kv {
        let mut ops = vec![
            OpSpec {
                name: "set",
                category: Category::Write,
            },
            OpSpec {
                name: "get",
                category: Category::Read,
            },
        ];
        let mut seen = Vec::new();
        for c in &opts.commands {
            let mut name = c.name();
            if seen.contains(&name) {
                name = format!("{name}_{}", seen.len() + 1);
            }
            seen.push(name.clone());
            // Operation names live as long as the run.
            ops.push(OpSpec {
                name: Box::leak(name.into_boxed_str()),
                category: Category::Other,
            });
        }
        let zipf = [opts.pattern_set, opts.pattern_get]
            .into_iter()
            .chain(opts.commands.iter().map(|c| c.pattern))
            .any(|p| p == KeyPattern::Zipfian)
            .then(|| {
                Distribution::new(
                    RandType::Zipfian,
                    RandParams {
                        zipfian_exp: opts.key_zipf_exp,
                        ..RandParams::default()
                    },
                    opts.key_min,
                    opts.key_max,
                )
            });
        Kv { opts, ops, zipf }
    }

    pub fn options(&self) -> &KvOptions {
        &self.opts
    }
}

/// Per-session state: the random generator, sequential positions, and
/// reusable buffers, so an event allocates nothing.
pub struct KvSession {
    rng: SmallRng,
    /// Position in the SET:GET (or command weight) cycle.
    cycle: u64,
    /// Next key for sequential and parallel patterns, per operation kind
    /// (SET, GET, then each --command), as memtier keeps one iterator each:
    /// with S:S, a GET reads the key its SET just wrote.
    next_seq: Vec<u64>,
    next_par: Vec<u64>,
    par_lo: u64,
    par_hi: u64,
    key: Vec<u8>,
    data: Vec<u8>,
    scratch: Vec<u8>,
    /// Per request in the batch: its operation kind and key number.
    kinds: Vec<usize>,
    keys: Vec<u64>,
}

impl Kv {
    fn key_number(&self, s: &mut KvSession, kind: usize, pattern: KeyPattern) -> u64 {
        let (lo, hi) = (self.opts.key_min, self.opts.key_max);
        match pattern {
            KeyPattern::Random => s.rng.random_range(lo..=hi),
            KeyPattern::Sequential => {
                let k = s.next_seq[kind];
                s.next_seq[kind] = if k >= hi { lo } else { k + 1 };
                k
            }
            KeyPattern::Parallel => {
                let k = s.next_par[kind];
                s.next_par[kind] = if k >= s.par_hi { s.par_lo } else { k + 1 };
                k
            }
            KeyPattern::Gaussian => {
                let median = self.opts.key_median.unwrap_or((lo + hi) as f64 / 2.0);
                let sd = self
                    .opts
                    .key_stddev
                    .unwrap_or((hi - lo) as f64 / 6.0)
                    .max(1e-9);
                // Box-Muller: one normal deviate from two uniforms. Out of
                // range, draw again, as memtier does (clamping would pile
                // the tails onto the two end keys).
                let mut k = median;
                for _ in 0..1000 {
                    let u1: f64 = 1.0 - s.rng.random::<f64>();
                    let u2: f64 = s.rng.random::<f64>();
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    k = (median + z * sd).round();
                    if (lo as f64..=hi as f64).contains(&k) {
                        break;
                    }
                }
                k.clamp(lo as f64, hi as f64) as u64
            }
            KeyPattern::Zipfian => self.zipf.as_ref().expect("built for Z").sample(&mut s.rng),
        }
    }

    /// Writes `prefix + n` into the session's key buffer.
    fn format_key(&self, s: &mut KvSession, n: u64) {
        s.key.clear();
        s.key.extend_from_slice(self.opts.key_prefix.as_bytes());
        s.key
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    /// The value for a SET of key `n`: a slice of the session's data block,
    /// or, with `--verify`, bytes derived from the key.
    fn value_len(&self, s: &mut KvSession, n: u64) -> usize {
        if self.opts.verify {
            let len = self.opts.data_size.pick(unit(mix(n ^ 0x5EED)));
            fill_for_key(&mut s.scratch, n, len);
            len
        } else {
            let r = s.rng.random::<f64>();
            self.opts.data_size.pick(r)
        }
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The bytes `--verify` expects for key `n`.
fn fill_for_key(buf: &mut Vec<u8>, n: u64, len: usize) {
    buf.clear();
    let mut state = mix(n.wrapping_add(0x9E37_79B9_7F4A_7C15));
    while buf.len() < len {
        state = mix(state);
        let take = (len - buf.len()).min(8);
        buf.extend_from_slice(&state.to_le_bytes()[..take]);
    }
}

impl<C: KvConn> Script<C> for Kv {
    type Session = KvSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, info: SessionInfo) -> Result<KvSession, DriverError> {
        let mut rng = self.opts.session_rng(&info);
        let max = self.opts.data_size.max();
        let mut data = vec![b'x'; max];
        if self.opts.random_data {
            rng.fill_bytes(&mut data);
        }
        // Parallel: this session's share of the key range.
        let (lo, hi) = (self.opts.key_min, self.opts.key_max);
        let span = hi - lo + 1;
        let count = info.count.max(1) as u64;
        let idx = info.index as u64 % count;
        let par_lo = lo + span * idx / count;
        let par_hi = (lo + span * (idx + 1) / count)
            .saturating_sub(1)
            .max(par_lo);
        Ok(KvSession {
            rng,
            cycle: 0,
            next_seq: vec![lo; 2 + self.opts.commands.len()],
            next_par: vec![par_lo; 2 + self.opts.commands.len()],
            par_lo,
            par_hi,
            key: Vec::with_capacity(self.opts.key_prefix.len() + 20),
            data,
            scratch: Vec::with_capacity(max),
            kinds: Vec::with_capacity(self.opts.pipeline),
            keys: Vec::with_capacity(self.opts.pipeline),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut KvSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        s.kinds.clear();
        s.keys.clear();
        for _ in 0..self.opts.pipeline {
            let (kind, pattern) = self.next_op(s);
            let n = self.key_number(s, kind, pattern);
            self.format_key(s, n);
            match kind {
                SET => {
                    let len = self.value_len(s, n);
                    let value = if self.opts.verify {
                        &s.scratch[..len]
                    } else {
                        &s.data[..len]
                    };
                    conn.queue_set(&s.key, value);
                }
                GET => conn.queue_get(&s.key),
                command => {
                    let template = &self.opts.commands[command - 2];
                    let len = self.value_len(s, n);
                    let value: &[u8] = if self.opts.verify {
                        &s.scratch[..len]
                    } else {
                        &s.data[..len]
                    };
                    let mut args: [&[u8]; MAX_COMMAND_WORDS] = [&[]; MAX_COMMAND_WORDS];
                    let argc = template.args.len();
                    for (slot, arg) in args.iter_mut().zip(&template.args) {
                        *slot = match arg {
                            Arg::Literal(l) => l,
                            Arg::Key => &s.key,
                            Arg::Data => value,
                        };
                    }
                    conn.queue_command(&args[..argc])?;
                }
            }
            s.kinds.push(kind);
            s.keys.push(n);
        }
        let clock = ctx.batch_clock();
        let mut failure: Option<DriverError> = None;
        let verify = self.opts.verify;
        let (kinds, keys, scratch) = (&s.kinds, &s.keys, &mut s.scratch);
        let data_size = &self.opts.data_size;
        conn.flush(&mut |at, reply| {
            let kind = kinds[at.index];
            ctx.record_reply(&clock, at.read, kind, reply.is_ok());
            match reply {
                Ok(r) => {
                    if kind == GET {
                        match r {
                            KvReply::Hit(bytes) => {
                                ctx.count_read(true);
                                if verify {
                                    let n = keys[at.index];
                                    fill_for_key(scratch, n, data_size.pick(unit(mix(n ^ 0x5EED))));
                                    if bytes != scratch.as_slice() && failure.is_none() {
                                        failure = Some(DriverError::fatal(format!(
                                            "verify failed: GET of key {n} returned {} bytes that differ from what was SET \
                                             (if an earlier run without --verify wrote this key range, load it again with \
                                             `loadcell prepare kv --verify` or use another --key-prefix)",
                                            bytes.len()
                                        )));
                                    }
                                }
                            }
                            KvReply::Miss => ctx.count_read(false),
                            KvReply::Done | KvReply::Array(_) => {}
                        }
                    }
                }
                Err(e) => {
                    if failure.is_none() {
                        failure = Some(e);
                    }
                }
            }
        })
        .await?;
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Kv {
    /// The next operation in the deterministic SET:GET (or command weight)
    /// cycle, as memtier interleaves them, and its key pattern.
    fn next_op(&self, s: &mut KvSession) -> (usize, KeyPattern) {
        let c = s.cycle;
        s.cycle += 1;
        if !self.opts.commands.is_empty() {
            let total: u64 = self.opts.commands.iter().map(|c| c.weight as u64).sum();
            let mut pos = c % total;
            for (i, cmd) in self.opts.commands.iter().enumerate() {
                if pos < cmd.weight as u64 {
                    let pattern = if cmd.uses_key() {
                        cmd.pattern
                    } else {
                        KeyPattern::Random
                    };
                    return (2 + i, pattern);
                }
                pos -= cmd.weight as u64;
            }
        }
        let total = (self.opts.ratio_set + self.opts.ratio_get) as u64;
        if c % total < self.opts.ratio_set as u64 {
            (SET, self.opts.pattern_set)
        } else {
            (GET, self.opts.pattern_get)
        }
    }
}

/// Why `cleanup` deletes nothing on a key-value target but a data set's.
pub(crate) const UNTRACKED_KEYS: &str =
    "cleanup is not available for key-value targets: loadcell does not track which keys it wrote, \
     and it never deletes data it cannot prove it created (a --dataset is the exception: \
     its prepare records what it loaded)";

/// memtier's model: the `kv` workload without a data set file.
#[derive(Debug, Clone)]
pub struct KvWorkload {
    pub opts: KvOptions,
}

impl Workload for KvWorkload {
    fn name(&self) -> &'static str {
        "kv"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::KV]
    }

    fn refuses(&self, driver: &DriverInfo) -> Option<String> {
        (self.opts.needs_commands() && !driver.kv.commands).then(|| {
            format!(
                "{} does not support arbitrary commands (--command)",
                driver.name
            )
        })
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

/// Nothing is checked before a run (the default): memtier's model needs
/// nothing prepared, its GETs of keys never set are the misses a cache
/// benchmark measures.
impl<C: KvConn> Lifecycle<C, KvFamily> for KvWorkload {
    type Script = Kv;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> Kv {
        Kv::new(self.opts.clone())
    }

    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        prepare(driver, &self.opts, loading, observer).await
    }

    async fn cleanup<D>(
        &self,
        _driver: &D,
        _how: &Cleanup,
        _observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        Err(CleanupError::Refused(UNTRACKED_KEYS.to_string()))
    }
}

/// Loads every key of the range once (pipelined SETs of the configured
/// sizes), spread over the loading connections.
async fn prepare<D>(
    driver: Arc<D>,
    opts: &KvOptions,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: KvConn,
{
    let Loading {
        connections,
        connect_timeout,
    } = loading;
    let (lo, hi) = (opts.key_min, opts.key_max);
    let span = hi - lo + 1;
    observer.message(&format!(
        "Loading keys {}{lo}..{}{hi} ({}) with {}",
        opts.key_prefix,
        opts.key_prefix,
        loadcell_core::words::counted(span, "key"),
        loadcell_core::words::counted(connections as u64, "connection")
    ));
    observer.add_total(span);
    let kv = Rc::new(Kv::new(KvOptions {
        commands: Vec::new(),
        ..opts.clone()
    }));
    load_in_parallel(
        driver,
        span,
        connections,
        connect_timeout,
        observer,
        move |mut conn, c, count, range, observer| {
            let kv = Rc::clone(&kv);
            async move {
                let mut s = <Kv as Script<D::Conn>>::open(
                    &kv,
                    &mut conn,
                    SessionInfo {
                        group: 0,
                        index: c,
                        count,
                        seed: c as u64,
                        run_seed: c as u64,
                    },
                )
                .await?;
                let mut n = range.start;
                while n < range.end {
                    let end = (n + LOAD_BATCH).min(range.end);
                    for k in lo + n..lo + end {
                        kv.format_key(&mut s, k);
                        let len = kv.value_len(&mut s, k);
                        let value = if kv.opts.verify {
                            &s.scratch[..len]
                        } else {
                            &s.data[..len]
                        };
                        conn.queue_set(&s.key, value);
                    }
                    flush_all(&mut conn).await?;
                    observer.loaded(end - n);
                    n = end;
                }
                Ok(())
            }
        },
    )
    .await
}

/// Requests per pipelined batch while loading.
pub(crate) const LOAD_BATCH: u64 = 100;

/// Sends everything queued; the first error of any reply fails it.
pub(crate) async fn flush_all<C: KvConn>(conn: &mut C) -> Result<(), DriverError> {
    let mut failure = None;
    conn.flush(&mut |_, r| {
        if let Err(e) = r {
            failure.get_or_insert(e);
        }
    })
    .await?;
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_templates_parse_and_reject_bad_input() {
        let t = CommandTemplate::parse("hset __key__ f1 __data__", 1, KeyPattern::Random).unwrap();
        assert_eq!(t.args.len(), 4);
        assert_eq!(t.name(), "hset");
        let q =
            CommandTemplate::parse(r#"set __key__ "hello world""#, 1, KeyPattern::Random).unwrap();
        assert_eq!(q.args[2], Arg::Literal(b"hello world".to_vec()));
        assert!(CommandTemplate::parse("", 1, KeyPattern::Random)
            .unwrap_err()
            .contains("empty"));
        assert!(CommandTemplate::parse("set \"x", 1, KeyPattern::Random)
            .unwrap_err()
            .contains("quote"));
        assert!(CommandTemplate::parse("set __kee__", 1, KeyPattern::Random)
            .unwrap_err()
            .contains("unknown placeholder '__kee__'"));
        assert!(CommandTemplate::parse("__key__ x", 1, KeyPattern::Random).is_err());
    }

    #[test]
    fn options_are_validated() {
        let zero = KvOptions {
            ratio_set: 0,
            ratio_get: 0,
            ..KvOptions::default()
        };
        assert!(zero.validate().unwrap_err().contains("0:0"));
        let inverted = KvOptions {
            key_min: 10,
            key_max: 5,
            ..KvOptions::default()
        };
        assert!(inverted
            .validate()
            .unwrap_err()
            .contains("greater than --key-maximum"));
        let empty = KvOptions {
            data_size: DataSize::Fixed(0),
            ..KvOptions::default()
        };
        assert!(empty.validate().unwrap_err().contains("size of 0"));
        assert!(DataSize::parse_list("0:1")
            .unwrap_err()
            .contains("size of 0"));
        assert!(DataSize::parse_range("10-5").is_err());
        assert!(KeyPattern::parse_pair("R").is_err());
        assert!(KeyPattern::parse_pair("R:Q").unwrap_err().contains("'Q'"));
        assert!(KvOptions::default().validate().is_ok());
    }

    fn session(kv: &Kv, index: usize, count: usize) -> KvSession {
        use loadcell_core::kv::OnReply;
        struct NoConn;
        impl KvConn for NoConn {
            fn queue_get(&mut self, _: &[u8]) {}
            fn queue_set(&mut self, _: &[u8], _: &[u8]) {}
            fn queue_delete(&mut self, _: &[u8]) {}
            fn queue_command(&mut self, _: &[&[u8]]) -> Result<(), DriverError> {
                Ok(())
            }
            async fn flush(&mut self, _: &mut OnReply<'_>) -> Result<(), DriverError> {
                Ok(())
            }
        }
        let info = SessionInfo {
            group: 0,
            index,
            count,
            seed: 1,
            run_seed: 1,
        };
        let mut conn = NoConn;
        let fut = <Kv as Script<NoConn>>::open(kv, &mut conn, info);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(fut)
            .unwrap()
    }

    #[test]
    fn ratio_cycle_and_patterns() {
        let kv = Kv::new(KvOptions {
            ratio_set: 1,
            ratio_get: 3,
            key_min: 1,
            key_max: 100,
            pattern_set: KeyPattern::Sequential,
            pattern_get: KeyPattern::Parallel,
            ..KvOptions::default()
        });
        let mut s = session(&kv, 1, 4);
        let kinds: Vec<usize> = (0..8).map(|_| kv.next_op(&mut s).0).collect();
        assert_eq!(kinds, vec![SET, GET, GET, GET, SET, GET, GET, GET]);
        let seq: Vec<u64> = (0..3)
            .map(|_| kv.key_number(&mut s, SET, KeyPattern::Sequential))
            .collect();
        assert_eq!(seq, vec![1, 2, 3]);
        // Session 1 of 4 owns keys 26..=50 and wraps within them.
        let par: Vec<u64> = (0..26)
            .map(|_| kv.key_number(&mut s, GET, KeyPattern::Parallel))
            .collect();
        assert_eq!(par[0], 26);
        assert_eq!(par[24], 50);
        assert_eq!(par[25], 26);
        for _ in 0..1000 {
            let g = kv.key_number(&mut s, GET, KeyPattern::Gaussian);
            assert!((1..=100).contains(&g));
        }
        let zipf = Kv::new(KvOptions {
            key_min: 1,
            key_max: 100,
            pattern_get: KeyPattern::Zipfian,
            ..KvOptions::default()
        });
        let mut z = session(&zipf, 0, 1);
        let draws: Vec<u64> = (0..10_000)
            .map(|_| zipf.key_number(&mut z, GET, KeyPattern::Zipfian))
            .collect();
        assert!(draws.iter().all(|k| (1..=100).contains(k)));
        let ones = draws.iter().filter(|&&k| k == 1).count();
        assert!(
            ones > draws.len() / 10,
            "rank 1 is the most popular: {ones}"
        );
    }

    #[test]
    fn sizes_and_keys() {
        let list = DataSize::parse_list("10:1,20:3").unwrap();
        assert_eq!(list.pick(0.0), 10);
        assert_eq!(list.pick(0.3), 20);
        assert_eq!(DataSize::parse_range("5-7").unwrap().pick(0.99), 7);
        let (mut a, mut c) = (Vec::new(), Vec::new());
        fill_for_key(&mut a, 42, 100);
        fill_for_key(&mut c, 42, 100);
        assert_eq!(a, c);
        fill_for_key(&mut c, 43, 100);
        assert_ne!(a, c);
    }

    #[test]
    fn sets_and_gets_keep_their_own_sequence_as_in_memtier() {
        let kv = Kv::new(KvOptions {
            ratio_set: 1,
            ratio_get: 1,
            key_min: 0,
            key_max: 99,
            pattern_set: KeyPattern::Sequential,
            pattern_get: KeyPattern::Sequential,
            ..KvOptions::default()
        });
        let mut s = session(&kv, 0, 1);
        let mut seen = Vec::new();
        for _ in 0..6 {
            let (kind, pattern) = kv.next_op(&mut s);
            seen.push((kind, kv.key_number(&mut s, kind, pattern)));
        }
        // SET k0, GET k0, SET k1, GET k1...: every GET reads a written key.
        assert_eq!(
            seen,
            vec![(SET, 0), (GET, 0), (SET, 1), (GET, 1), (SET, 2), (GET, 2)]
        );
    }

    #[test]
    fn gaussian_keys_out_of_range_are_drawn_again_not_piled_on_the_ends() {
        let kv = Kv::new(KvOptions {
            key_min: 1,
            key_max: 100,
            key_stddev: Some(100.0),
            pattern_get: KeyPattern::Gaussian,
            ..KvOptions::default()
        });
        let mut s = session(&kv, 0, 1);
        let n = 20_000;
        let ends = (0..n)
            .map(|_| kv.key_number(&mut s, GET, KeyPattern::Gaussian))
            .filter(|&k| k == 1 || k == 100)
            .count();
        // About 2 of 100 keys' share, not the ~60% beyond the range.
        assert!(ends < n / 20, "{ends} of {n} on the two end keys");
    }

    #[test]
    fn a_command_longer_than_supported_is_refused() {
        let words = vec!["x"; MAX_COMMAND_WORDS + 1].join(" ");
        let e = CommandTemplate::parse(&format!("rpush __key__ {words}"), 1, KeyPattern::Random)
            .unwrap_err();
        assert!(e.contains("at most 16"), "{e}");
        assert!(CommandTemplate::parse("rpush __key__ a b c", 1, KeyPattern::Random).is_ok());
    }
}
