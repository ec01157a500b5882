//! Documents shaped like esrally's geonames track (a JSON conversion of
//! geonames.org's `allCountries`, 311 bytes a document on average): the
//! fields and types of its mapping, names built from syllables of real
//! place names into a fixed table that a few names dominate (as "San
//! José" and "Mill Creek" recur in the real corpus), and countries as
//! skewed as the real ones (the United States, China and India hold
//! about a third of its places). Empty fields are left out, as the
//! track's documents leave them out.

use super::mix::{cumulative, write_fixed, write_int, write_padded, Mix};

/// The place names documents draw from: fixed, whatever the seed, so a
/// query for a name finds the documents any seed gave it.
const NAMES: usize = 4096;

/// Syllables of place names, with the accented spelling and its ASCII
/// folding (`name` and `asciiname` differ as in the real corpus).
const SYLLABLES: &[(&str, &str)] = &[
    ("ber", "ber"),
    ("lin", "lin"),
    ("san", "san"),
    ("ta", "ta"),
    ("ro", "ro"),
    ("ma", "ma"),
    ("ca", "ca"),
    ("mon", "mon"),
    ("vil", "vil"),
    ("le", "le"),
    ("dor", "dor"),
    ("ha", "ha"),
    ("ven", "ven"),
    ("wood", "wood"),
    ("brook", "brook"),
    ("field", "field"),
    ("ton", "ton"),
    ("burg", "burg"),
    ("stad", "stad"),
    ("ko", "ko"),
    ("na", "na"),
    ("ri", "ri"),
    ("sa", "sa"),
    ("tel", "tel"),
    ("mar", "mar"),
    ("pa", "pa"),
    ("lo", "lo"),
    ("gua", "gua"),
    ("ja", "ja"),
    ("wa", "wa"),
    ("shi", "shi"),
    ("zhou", "zhou"),
    ("pur", "pur"),
    ("ab", "ab"),
    ("ad", "ad"),
    ("ães", "aes"),
    ("ñu", "nu"),
    ("zü", "zu"),
    ("ré", "re"),
    ("ö", "o"),
    ("gar", "gar"),
    ("nes", "nes"),
    ("vik", "vik"),
    ("dal", "dal"),
    ("holm", "holm"),
];

/// Words that open or join names in the real corpus.
const PREFIXES: &[&str] = &[
    "San", "Santa", "Lake", "Mount", "Rio", "Pic de", "Col de", "Bukit", "Kampung", "Mill",
    "North", "South", "Saint", "Al", "Nueva", "Bad", "Sankt", "Cerro", "Ban", "Wadi",
];
const SUFFIXES: &[&str] = &[
    "Creek", "Hills", "River", "Springs", "Village", "Airport", "School", "Church", "Park",
    "Station", "Falls", "Lake", "Island", "Dam", "Valley",
];

/// Countries as geonames holds them: code, a time zone, the share of
/// the corpus's places in tenths of a percent, and the box their places
/// fall in (degrees: latitude and longitude, low and high).
const COUNTRIES: &[(&str, &str, u32, [i32; 4])] = &[
    ("US", "America/Chicago", 190, [25, 49, -124, -67]),
    ("CN", "Asia/Shanghai", 75, [20, 45, 80, 125]),
    ("IN", "Asia/Kolkata", 55, [8, 33, 68, 90]),
    ("NO", "Europe/Oslo", 45, [58, 71, 5, 30]),
    ("MX", "America/Mexico_City", 40, [15, 32, -117, -87]),
    ("ID", "Asia/Jakarta", 40, [-10, 5, 95, 140]),
    ("CA", "America/Toronto", 35, [43, 70, -140, -53]),
    ("RU", "Europe/Moscow", 35, [43, 70, 30, 170]),
    ("IR", "Asia/Tehran", 30, [26, 39, 44, 63]),
    ("TH", "Asia/Bangkok", 25, [6, 20, 98, 105]),
    ("PK", "Asia/Karachi", 25, [24, 37, 61, 77]),
    ("AU", "Australia/Sydney", 25, [-43, -11, 113, 153]),
    ("DE", "Europe/Berlin", 20, [47, 55, 6, 15]),
    ("FR", "Europe/Paris", 20, [42, 51, -4, 8]),
    ("BR", "America/Sao_Paulo", 20, [-33, 5, -73, -35]),
    ("JP", "Asia/Tokyo", 18, [31, 45, 130, 145]),
    ("PE", "America/Lima", 15, [-18, 0, -81, -69]),
    ("CO", "America/Bogota", 15, [-4, 12, -79, -67]),
    ("ES", "Europe/Madrid", 15, [36, 43, -9, 3]),
    ("IT", "Europe/Rome", 15, [37, 47, 7, 18]),
    ("GB", "Europe/London", 14, [50, 58, -6, 2]),
    ("AT", "Europe/Vienna", 8, [46, 49, 10, 17]),
    ("CH", "Europe/Zurich", 8, [46, 48, 6, 10]),
    ("SE", "Europe/Stockholm", 10, [55, 69, 11, 24]),
    ("PH", "Asia/Manila", 12, [5, 19, 117, 126]),
    ("VN", "Asia/Ho_Chi_Minh", 10, [9, 23, 102, 109]),
    ("TR", "Europe/Istanbul", 10, [36, 42, 26, 45]),
    ("NG", "Africa/Lagos", 8, [4, 14, 3, 14]),
    (
        "AR",
        "America/Argentina/Buenos_Aires",
        8,
        [-55, -22, -73, -54],
    ),
    ("ZA", "Africa/Johannesburg", 8, [-35, -22, 16, 33]),
    ("AD", "Europe/Andorra", 1, [42, 43, 1, 2]),
];

/// Feature classes and codes (`P`/`PPL` a populated place, `H`/`STM` a
/// stream, `T`/`MT` a mountain…), with their shares in the corpus.
const FEATURES: &[(&str, &str, u32)] = &[
    ("P", "PPL", 30),
    ("H", "STM", 14),
    ("S", "HTL", 8),
    ("T", "MT", 8),
    ("S", "SCH", 6),
    ("S", "CH", 5),
    ("L", "PRK", 4),
    ("H", "LK", 4),
    ("T", "HLL", 4),
    ("A", "ADM2", 3),
    ("H", "RSV", 3),
    ("S", "FRM", 3),
    ("P", "PPLX", 3),
    ("T", "PK", 2),
    ("A", "ADM3", 2),
    ("V", "FRST", 1),
];

/// The geonames generator: its name table, built once.
#[derive(Debug, Clone)]
pub struct Geonames {
    /// `name` and `asciiname` of every place name, one after the other.
    names: Vec<(Box<str>, Box<str>)>,
    countries: Vec<u32>,
    features: Vec<u32>,
}

impl Default for Geonames {
    fn default() -> Self {
        Geonames::new()
    }
}

impl Geonames {
    pub fn new() -> Geonames {
        // A fixed stream: the table is the same for every run.
        let mut mix = Mix::new(0x6765_6f6e_616d_6573, 0);
        let names = (0..NAMES).map(|_| place_name(&mut mix)).collect();
        Geonames {
            names,
            countries: cumulative(COUNTRIES.iter().map(|c| c.2)),
            features: cumulative(FEATURES.iter().map(|f| f.2)),
        }
    }

    /// The mapping: esrally's geonames fields and types.
    pub fn mapping() -> &'static str {
        r#"{"dynamic":"strict","properties":{"geonameid":{"type":"long"},"name":{"type":"text","fields":{"raw":{"type":"keyword"}}},"asciiname":{"type":"text","fields":{"raw":{"type":"keyword"}}},"alternatenames":{"type":"text"},"feature_class":{"type":"keyword"},"feature_code":{"type":"keyword"},"country_code":{"type":"keyword"},"cc2":{"type":"keyword"},"admin1_code":{"type":"keyword"},"admin2_code":{"type":"keyword"},"admin3_code":{"type":"keyword"},"admin4_code":{"type":"keyword"},"population":{"type":"long"},"elevation":{"type":"integer"},"dem":{"type":"integer"},"timezone":{"type":"keyword"},"location":{"type":"geo_point"}}}"#
    }

    /// The place name of a draw: a few names take most documents.
    #[inline]
    fn name(&self, mix: &mut Mix) -> usize {
        mix.skewed(NAMES as u64) as usize
    }

    /// Writes document `n`'s source (one JSON object, no newline).
    #[inline]
    pub fn write(&self, seed: u64, n: u64, out: &mut Vec<u8>) {
        let p = self.place(seed, n);
        let (name, ascii) = &self.names[p.name];
        let (code, timezone, _, _) = COUNTRIES[p.country];
        let (class, feature, _) = FEATURES[p.feature];
        out.extend_from_slice(b"{\"geonameid\":");
        write_int(out, 2_000_000 + n);
        out.extend_from_slice(b",\"name\":\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\",\"asciiname\":\"");
        out.extend_from_slice(ascii.as_bytes());
        out.extend_from_slice(b"\"");
        if p.alternates > 0 {
            out.extend_from_slice(b",\"alternatenames\":\"");
            out.extend_from_slice(ascii.as_bytes());
            for &other in &p.other_names[..p.alternates - 1] {
                out.push(b',');
                out.extend_from_slice(self.names[other].0.as_bytes());
            }
            out.push(b'"');
        }
        out.extend_from_slice(b",\"feature_class\":\"");
        out.extend_from_slice(class.as_bytes());
        out.extend_from_slice(b"\",\"feature_code\":\"");
        out.extend_from_slice(feature.as_bytes());
        out.extend_from_slice(b"\",\"country_code\":\"");
        out.extend_from_slice(code.as_bytes());
        out.extend_from_slice(b"\",\"admin1_code\":\"");
        write_padded(out, p.admin1, 2);
        out.push(b'"');
        for ((field, width), code) in [
            (&b",\"admin2_code\":\""[..], 3),
            (b",\"admin3_code\":\"", 5),
            (b",\"admin4_code\":\"", 7),
        ]
        .into_iter()
        .zip(p.admin)
        {
            if let Some(code) = code {
                out.extend_from_slice(field);
                write_padded(out, code, width);
                out.push(b'"');
            }
        }
        out.extend_from_slice(b",\"population\":");
        write_int(out, p.population);
        if p.elevation {
            out.extend_from_slice(b",\"elevation\":");
            write_int(out, p.dem);
        }
        out.extend_from_slice(b",\"dem\":");
        write_int(out, p.dem);
        out.extend_from_slice(b",\"timezone\":\"");
        out.extend_from_slice(timezone.as_bytes());
        // esrally's location is [lon, lat], five decimals.
        out.extend_from_slice(b"\",\"location\":[");
        write_fixed(out, p.lon, 5);
        out.push(b',');
        write_fixed(out, p.lat, 5);
        out.extend_from_slice(b"]}");
    }

    /// The random draws that make document `n`, taken in one order, so
    /// that a query can ask for a value document `n` holds without
    /// writing it.
    #[inline]
    fn place(&self, seed: u64, n: u64) -> Place {
        let mut mix = Mix::new(seed, n);
        let name = self.name(&mut mix);
        let country = mix.weighted(&self.countries);
        let feature = mix.weighted(&self.features);
        let alternates = mix.below(6) as usize;
        let mut other_names = [0; 4];
        for other in other_names.iter_mut().take(alternates.saturating_sub(1)) {
            *other = self.name(&mut mix);
        }
        let admin1 = mix.below(60);
        let admin = [(60, 3), (12, 5), (4, 7)]
            .map(|(percent, width)| mix.chance(percent).then(|| mix.below(10u64.pow(width))));
        let class = FEATURES[feature].0;
        let population = if class == "P" || class == "A" {
            mix.skewed(1 << 20) * mix.below(8)
        } else {
            0
        };
        let dem = mix.skewed(3000);
        let elevation = mix.chance(30);
        let [lat_lo, lat_hi, lon_lo, lon_hi] = COUNTRIES[country].3;
        let lon = degrees(&mut mix, lon_lo, lon_hi);
        let lat = degrees(&mut mix, lat_lo, lat_hi);
        Place {
            name,
            country,
            feature,
            alternates,
            other_names,
            admin1,
            admin,
            population,
            dem,
            elevation,
            lon,
            lat,
        }
    }

    /// Writes the value of `field` that document `n` (made with `seed`)
    /// holds, as it goes inside a JSON string or as a number; `pick`
    /// chooses among several (a word of the name). `false` for a field
    /// this generator cannot give values of.
    pub(crate) fn value(
        &self,
        field: &str,
        (seed, n): (u64, u64),
        pick: &mut Mix,
        out: &mut Vec<u8>,
    ) -> bool {
        let p = self.place(seed, n);
        let (name, ascii) = &self.names[p.name];
        match field {
            "country_code" => out.extend_from_slice(COUNTRIES[p.country].0.as_bytes()),
            "name" => out.extend_from_slice(name.as_bytes()),
            "asciiname" => out.extend_from_slice(ascii.as_bytes()),
            // One word of a name as the name field holds it (accents and
            // all: the standard analyzer does not fold them), for `match`.
            "name.word" => {
                let words = name.split(' ').count() as u64;
                let word = name.split(' ').nth(pick.below(words) as usize);
                out.extend_from_slice(word.unwrap_or_default().as_bytes())
            }
            "feature_code" => out.extend_from_slice(FEATURES[p.feature].1.as_bytes()),
            "timezone" => out.extend_from_slice(COUNTRIES[p.country].1.as_bytes()),
            "population" => write_int(out, p.population),
            _ => return false,
        }
        true
    }
}

/// The draws of one document (see [`Geonames::place`]): indexes into the
/// name, country and feature tables, and the numbers it holds.
struct Place {
    name: usize,
    country: usize,
    feature: usize,
    /// How many alternate names: the ASCII name, then `other_names`.
    alternates: usize,
    other_names: [usize; 4],
    admin1: u64,
    /// admin2, admin3 and admin4 codes, where the document has them.
    admin: [Option<u64>; 3],
    population: u64,
    dem: u64,
    elevation: bool,
    lon: i64,
    lat: i64,
}

/// Fields [`Geonames::value`] gives values of.
pub const VALUE_FIELDS: &[&str] = &[
    "country_code",
    "name",
    "asciiname",
    "name.word",
    "feature_code",
    "timezone",
    "population",
];

/// A coordinate in `lo..hi` degrees, in hundred-thousandths.
#[inline]
fn degrees(mix: &mut Mix, lo: i32, hi: i32) -> i64 {
    let span = (hi - lo) as u64 * 100_000;
    i64::from(lo) * 100_000 + mix.below(span) as i64
}

/// A place name of one to three words built from syllables: `name` and
/// its ASCII folding.
fn place_name(mix: &mut Mix) -> (Box<str>, Box<str>) {
    let (mut name, mut ascii) = (String::new(), String::new());
    let mut push = |text: &str, folded: &str| {
        if !name.is_empty() {
            name.push(' ');
            ascii.push(' ');
        }
        name.push_str(text);
        ascii.push_str(folded);
    };
    if mix.chance(40) {
        let prefix = PREFIXES[mix.below(PREFIXES.len() as u64) as usize];
        push(prefix, prefix);
    }
    let (word, folded) = word(mix);
    push(&word, &folded);
    if mix.chance(35) {
        let suffix = SUFFIXES[mix.below(SUFFIXES.len() as u64) as usize];
        push(suffix, suffix);
    }
    (name.into(), ascii.into())
}

/// A capitalised word of two to four syllables, and its ASCII folding.
fn word(mix: &mut Mix) -> (String, String) {
    let (mut word, mut folded) = (String::new(), String::new());
    for _ in 0..2 + mix.below(3) {
        let (s, f) = SYLLABLES[mix.below(SYLLABLES.len() as u64) as usize];
        word.push_str(s);
        folded.push_str(f);
    }
    (capitalised(&word), capitalised(&folded))
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
