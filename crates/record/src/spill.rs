//! A run's per-interval points held on disk until the run ends, so that
//! the process's memory stays flat however long it runs: each point is
//! written as one JSON line to an unlinked temporary file (gone with the
//! process, whatever ends it) and read back into a [`Coarsened`] series
//! when the result is made. Held in memory, an hour of 1 s intervals
//! took ~9 MB (an interval with its histogram and a resource sample with
//! its server counters, ~2.5 KB a second); a day, ~200 MB.
//!
//! The interval log next to the result is what survives a killed run;
//! this file only keeps the points out of memory while the run lasts.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::coarse::{Coarsen, Coarsened};

/// Points in time order, at most `bound` of them once read back; see the
/// module doc.
pub struct Spilled<T: Coarsen> {
    /// `None` when no temporary file could be made, or writing to it
    /// failed (a full disk): the points are then coarsened in memory,
    /// which is bounded too, by `bound` points.
    file: Option<File>,
    line: Vec<u8>,
    in_memory: Coarsened<T>,
    bound: usize,
}

impl<T: Coarsen + Serialize + DeserializeOwned> Spilled<T> {
    pub fn new(bound: usize) -> Spilled<T> {
        Spilled {
            file: tempfile::tempfile().ok(),
            line: Vec::new(),
            in_memory: Coarsened::new(bound),
            bound,
        }
    }

    /// Writes `point` as one line, with one write so that a failed write
    /// leaves every earlier line whole.
    pub fn push(&mut self, point: T) {
        if let Some(file) = &mut self.file {
            self.line.clear();
            serde_json::to_writer(&mut self.line, &point).expect("points serialize");
            self.line.push(b'\n');
            if file.write_all(&self.line).is_ok() {
                return;
            }
            // Those already on disk join the series in memory, before this one.
            if let Some(file) = self.file.take() {
                read_back(file, &mut self.in_memory);
            }
        }
        self.in_memory.push(point);
    }

    /// Every point, coarsened to the bound.
    pub fn into_vec(mut self) -> Vec<T> {
        match self.file.take() {
            Some(file) => {
                let mut series = Coarsened::new(self.bound);
                read_back(file, &mut series);
                series.into_vec()
            }
            None => self.in_memory.into_vec(),
        }
    }
}

/// Pushes the whole lines of `file` into `series`; a line cut short by a
/// failed write is the point that write was for, pushed by its caller.
fn read_back<T: Coarsen + DeserializeOwned>(mut file: File, series: &mut Coarsened<T>) {
    if file.seek(SeekFrom::Start(0)).is_err() {
        return;
    }
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str(&line) {
            Ok(point) => series.push(point),
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ResourceSample;

    fn sample(t: f64) -> ResourceSample {
        ResourceSample {
            t_s: t,
            client_cpu_pct: t,
            server: [("ops_per_s".to_string(), 2.0 * t)].into(),
            ..ResourceSample::default()
        }
    }

    #[test]
    fn points_read_back_as_the_in_memory_series_would_hold_them() {
        let mut spilled = Spilled::new(8);
        let mut in_memory = Coarsened::new(8);
        for t in 1..=37 {
            spilled.push(sample(f64::from(t)));
            in_memory.push(sample(f64::from(t)));
        }
        assert!(spilled.file.is_some(), "a temporary file could be made");
        assert_eq!(spilled.into_vec(), in_memory.into_vec());
    }

    #[test]
    fn a_failed_write_keeps_every_point_in_memory_from_then_on() {
        let mut spilled = Spilled::new(64);
        spilled.push(sample(1.0));
        spilled.push(sample(2.0));
        // Writes to a file opened read-only fail, as on a full disk; the
        // two points already written are read back from it.
        let written = spilled.file.take().unwrap();
        let path = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&written)
        );
        spilled.file = Some(File::open(path).unwrap());
        drop(written);
        spilled.push(sample(3.0));
        assert!(spilled.file.is_none());
        spilled.push(sample(4.0));
        let times: Vec<f64> = spilled.into_vec().iter().map(|s| s.t_s).collect();
        assert_eq!(times, [1.0, 2.0, 3.0, 4.0]);
    }
}
