//! One memory budget for all symbol data (`--max-symbol-mb`).
//!
//! Consumers with a size of their own (the frame and stack interner; per JVM, whatever a
//! HotSpot reader caches) report it with [`SymbolBudget::report`]; the perf maps share what
//! they leave, through one [`MemoryPool`] that every map load pays from, on whichever thread
//! it runs. Each JVM's map gets a fair cap (water-filling: small maps are served whole, the
//! largest share the rest equally), so past the budget it is the largest maps that are
//! dropped or indexed partially.
//!
//! The private copies of native files' symbol tables are counted ([`Consumer::NativeCopies`]);
//! blazesym's index of each copy is not (blazesym does not say what it holds): it is dropped with
//! its copy ([`super::native`]), and the memory limits the deployment files set leave room for it.

use std::collections::HashMap;
use std::sync::Arc;

use jvm_symbols::MemoryPool;

/// Who holds symbol memory besides the perf maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Consumer {
    /// Interned frames and stacks.
    Interner,
    /// The HotSpot readers' caches of one JVM (Method*, nmethod and scope data).
    HotSpot(u32),
    /// Private copies of native files' symbol tables (`super::native`).
    NativeCopies,
}

pub struct SymbolBudget {
    total_bytes: u64,
    maps: Arc<MemoryPool>,
    others: HashMap<Consumer, u64>,
}

impl SymbolBudget {
    pub fn new(total_bytes: u64) -> Self {
        SymbolBudget { total_bytes, maps: MemoryPool::new(total_bytes), others: HashMap::new() }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// `who` now holds `bytes`; the perf maps' share shrinks or grows accordingly.
    pub fn report(&mut self, who: Consumer, bytes: u64) {
        self.others.insert(who, bytes);
        self.maps.set_limit(self.maps_share_bytes());
    }

    pub fn forget_process(&mut self, pid: u32) {
        if self.others.remove(&Consumer::HotSpot(pid)).is_some() {
            self.maps.set_limit(self.maps_share_bytes());
        }
    }

    /// What the perf maps may hold together.
    pub fn maps_share_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.others.values().sum())
    }

    /// The pool every perf-map load pays from.
    pub fn maps_pool(&self) -> &Arc<MemoryPool> {
        &self.maps
    }

    /// All symbol memory accounted for: perf maps held and being read, and the reported rest.
    pub fn used_bytes(&self) -> u64 {
        self.maps.used_bytes() + self.others.values().sum::<u64>()
    }
}

/// Fair caps for maps wanting `demands` bytes (`None`: not known yet, as much as it may get)
/// out of `total`: every demand under the common level is met whole, the rest get the level.
pub fn water_fill(total: u64, demands: &[(u32, Option<u64>)]) -> HashMap<u32, u64> {
    let mut order: Vec<(u32, u64)> = demands.iter().map(|&(pid, d)| (pid, d.unwrap_or(u64::MAX))).collect();
    order.sort_by_key(|&(_, d)| d);
    let mut caps = HashMap::with_capacity(order.len());
    let mut left = total;
    for (served, &(pid, demand)) in order.iter().enumerate() {
        let level = left / (order.len() - served) as u64;
        let cap = demand.min(level);
        caps.insert(pid, cap);
        left -= cap;
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_maps_are_served_whole_and_the_largest_share_the_rest() {
        let caps = water_fill(300, &[(1, Some(50)), (2, Some(500)), (3, Some(400)), (4, Some(10))]);
        assert_eq!((caps[&1], caps[&4]), (50, 10));
        assert_eq!((caps[&2], caps[&3]), (120, 120));
        let caps = water_fill(300, &[(1, Some(50)), (2, None)]);
        assert_eq!((caps[&1], caps[&2]), (50, 250), "an unknown demand takes what is left");
        let caps = water_fill(90, &[(1, None), (2, None), (3, None)]);
        assert_eq!(caps.values().sum::<u64>(), 90);
        assert!(caps.values().all(|&c| c == 30));
        assert!(water_fill(100, &[]).is_empty());
    }

    #[test]
    fn every_split_stays_within_the_total() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..500 {
            let total = rand(1 << 30);
            let demands: Vec<(u32, Option<u64>)> =
                (0..1 + rand(8) as u32).map(|pid| (pid, (rand(4) > 0).then(|| rand(1 << 30)))).collect();
            let caps = water_fill(total, &demands);
            assert!(caps.values().sum::<u64>() <= total, "{total} {demands:?} {caps:?}");
            let level = caps.values().max().copied().unwrap_or(0);
            for (pid, demand) in &demands {
                let cap = caps[pid];
                assert!(cap <= demand.unwrap_or(u64::MAX));
                // A map that got less than it wanted got the most anyone got (to the byte
                // lost in rounding per map).
                let n = demands.len() as u64;
                assert!(cap == demand.unwrap_or(u64::MAX) || cap + n >= level, "{demands:?} {caps:?}");
            }
        }
    }

    #[test]
    fn reported_consumers_shrink_the_maps_share() {
        let mut budget = SymbolBudget::new(1000);
        budget.report(Consumer::Interner, 100);
        budget.report(Consumer::HotSpot(7), 50);
        assert_eq!(budget.maps_share_bytes(), 850);
        assert_eq!(budget.maps_pool().limit_bytes(), 850);
        budget.report(Consumer::Interner, 300);
        assert_eq!(budget.maps_share_bytes(), 650);
        budget.forget_process(7);
        assert_eq!((budget.maps_share_bytes(), budget.used_bytes()), (700, 300));
        budget.report(Consumer::Interner, 5000);
        assert_eq!(budget.maps_share_bytes(), 0, "never negative");
    }
}
