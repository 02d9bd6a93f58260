//! The idle baseline of the dynamic view: fixed (`--idle-power`) or learned as the lowest
//! socket power seen so far. Learning is a running minimum over what attribution was given,
//! so it stays pure; it starts high and falls, so early cycles under-report dynamic energy.

use std::collections::BTreeMap;

use crate::energy::SocketEnergy;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdleBaseline {
    fixed_w: Option<f64>,
    learned_min_w: BTreeMap<u32, f64>,
}

impl IdleBaseline {
    /// `fixed_w`: idle power per socket from `--idle-power`; `None` learns it.
    pub fn new(fixed_w: Option<f64>) -> Self {
        Self { fixed_w, learned_min_w: BTreeMap::new() }
    }

    /// Feeds one cycle's socket readings; call before [`super::attribute`] for that cycle.
    /// Flagged readings and empty cycles teach nothing.
    pub fn observe(&mut self, sockets: &[SocketEnergy], duration_ns: u64) {
        if self.fixed_w.is_some() || duration_ns == 0 {
            return;
        }
        for s in sockets.iter().filter(|s| !s.flagged) {
            let power_w = super::power_w(s.energy_uj, duration_ns);
            self.learned_min_w.entry(s.socket).and_modify(|m| *m = m.min(power_w)).or_insert(power_w);
        }
    }

    /// Idle power of `socket` in W; 0 before anything was learned.
    pub fn idle_power_w(&self, socket: u32) -> f64 {
        self.fixed_w.or_else(|| self.learned_min_w.get(&socket).copied()).unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(socket: u32, energy_uj: f64, flagged: bool) -> SocketEnergy {
        SocketEnergy { socket, energy_uj, flagged, ..Default::default() }
    }

    #[test]
    fn learns_the_minimum_per_socket_ignoring_flagged_cycles() {
        let mut b = IdleBaseline::new(None);
        assert_eq!(b.idle_power_w(0), 0.0);
        let second = 1_000_000_000;
        b.observe(&[reading(0, 30e6, false), reading(1, 50e6, false)], second);
        b.observe(&[reading(0, 20e6, false), reading(1, 0.0, true)], second);
        b.observe(&[reading(0, 40e6, false)], second);
        assert_eq!(b.idle_power_w(0), 20.0);
        assert_eq!(b.idle_power_w(1), 50.0);
    }

    #[test]
    fn fixed_baseline_wins() {
        let mut b = IdleBaseline::new(Some(7.5));
        b.observe(&[reading(0, 1e6, false)], 1_000_000_000);
        assert_eq!(b.idle_power_w(0), 7.5);
    }
}
