//! `cpu`: sysbench's CPU test, so that its score compares with sysbench's
//! on any machine. One event checks every number below `--cpu-max-prime`
//! for primality by trial division, exactly as sysbench's
//! `cpu_execute_event` does (64-bit integers, the bound a `double` square
//! root): events per second is the score.

use std::collections::BTreeMap;

use loadcell_core::family::MachineFamily;
use loadcell_core::machine::MachineConn;
use loadcell_core::{DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use serde_json::Value;

use crate::workload::{Lifecycle, Workload};

/// sysbench's default `--cpu-max-prime`.
pub const DEFAULT_MAX_PRIME: u64 = 10_000;

#[derive(Debug, Clone)]
pub struct CpuWorkload {
    pub max_prime: u64,
}

impl Workload for CpuWorkload {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::MACHINE]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([("cpu_max_prime".to_string(), Value::from(self.max_prime))])
    }
}

/// The odd and even numbers from 3 up to, not including, `max_prime` that
/// are prime, counted as sysbench counts them (so 2 is not among them).
pub fn count_primes(max_prime: u64) -> u64 {
    let mut primes = 0;
    for c in 3..max_prime {
        let bound = (c as f64).sqrt();
        let mut l: u64 = 2;
        while l as f64 <= bound {
            if c % l == 0 {
                break;
            }
            l += 1;
        }
        if l as f64 > bound {
            primes += 1;
        }
    }
    primes
}

const OPS: &[OpSpec] = &[OpSpec {
    name: "primes",
    category: Category::Other,
}];

pub struct Cpu {
    max_prime: u64,
}

impl<C: MachineConn + 'static> Script<C> for Cpu {
    type Session = ();

    fn ops(&self) -> &[OpSpec] {
        OPS
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, _session: SessionInfo) -> Result<(), DriverError> {
        Ok(())
    }

    async fn event(
        &self,
        _conn: &mut C,
        _session: &mut (),
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        // `black_box` on both sides: the bound is not a constant to fold,
        // and the count is used, so the loop is neither precomputed nor
        // dropped (sysbench stores it in a global for the same reason).
        let max_prime = std::hint::black_box(self.max_prime);
        let primes = ctx.op(0, async { Ok(count_primes(max_prime)) }).await?;
        std::hint::black_box(primes);
        Ok(())
    }
}

impl<C: MachineConn + 'static> Lifecycle<C, MachineFamily> for CpuWorkload {
    type Script = Cpu;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> Cpu {
        Cpu {
            max_prime: self.max_prime,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_counts_the_primes_sysbench_counts() {
        // π(10000) = 1229 primes below 10000; sysbench starts at 3, so 2
        // is not counted.
        assert_eq!(count_primes(DEFAULT_MAX_PRIME), 1228);
        assert_eq!(count_primes(20_000), 2261);
        assert_eq!(count_primes(3), 0);
        assert_eq!(count_primes(12), 4); // 3 5 7 11
    }
}
