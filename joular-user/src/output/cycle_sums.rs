//! One cycle's sums in the result tree: per method and call tree of a process, and the
//! JoularJX-side filter of what is a method.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::attribution::stacks::aggregate::NamedTotal;
use crate::attribution::stacks::methods::is_method_name;
use crate::attribution::stacks::{AttributedCycle, StackShare};

/// One cycle's energy and samples of one process, per method and call tree.
#[derive(Default)]
pub(super) struct CycleSums<'a> {
    pub all_methods: HashMap<Arc<str>, (f64, u64)>,
    pub app_methods: HashMap<Arc<str>, (f64, u64)>,
    /// By stack id: call trees are joined only when runtime call trees are written.
    pub all_trees: HashMap<usize, (f64, u64, &'a StackShare)>,
    pub app_trees: HashMap<Arc<str>, (f64, u64)>,
}

pub(super) fn add(sum: &mut (f64, u64), energy_uj: f64, samples: u64) {
    sum.0 += energy_uj;
    sum.1 += samples;
}

/// The cycle's sums per process, added in the stage's order.
pub(super) fn cycle_sums(cycle: &AttributedCycle) -> BTreeMap<u32, CycleSums<'_>> {
    let mut sums: BTreeMap<u32, CycleSums> = BTreeMap::new();
    for charge in &cycle.charges {
        let process = sums.entry(charge.pid).or_default();
        for share in &charge.stacks {
            let (energy_uj, samples) = (share.energy.cpu_uj, share.samples);
            add(process.all_methods.entry(share.all_method.clone()).or_default(), energy_uj, samples);
            add(process.app_methods.entry(share.app_method.clone()).or_default(), energy_uj, samples);
            let tree = process.all_trees.entry(share.id).or_insert((0.0, 0, share));
            tree.0 += energy_uj;
            tree.1 += samples;
            add(process.app_trees.entry(share.app_tree.clone()).or_default(), energy_uj, samples);
        }
    }
    sums
}

pub(super) fn methods_only(mut totals: Vec<NamedTotal>) -> Vec<NamedTotal> {
    totals.retain(|t| is_method_name(&t.name));
    totals
}
