//! One cycle's sums in the session sink: per method and call tree of a process, per thread for
//! the cycle report, and the JoularJX-side filter of what is a method.

use std::collections::HashMap;
use std::sync::Arc;

use crate::attribution::stacks::aggregate::{sort_totals, NamedTotal, StackTable};
use crate::attribution::stacks::methods::is_method_name;
use crate::model::MethodReport;

/// One cycle's energy and samples of one process, per method and call tree.
#[derive(Default)]
pub(super) struct CycleSums {
    pub all_methods: HashMap<Arc<str>, (f64, u64)>,
    pub app_methods: HashMap<Arc<str>, (f64, u64)>,
    /// By stack id: call trees are joined only when runtime call trees are written.
    pub all_trees: HashMap<usize, (f64, u64)>,
    pub app_trees: HashMap<Arc<str>, (f64, u64)>,
}

pub(super) fn add(sum: &mut (f64, u64), energy_uj: f64, samples: u64) {
    sum.0 += energy_uj;
    sum.1 += samples;
}

pub(super) fn named<K>(sums: HashMap<K, (f64, u64)>, name: impl Fn(K) -> Arc<str>) -> Vec<NamedTotal> {
    let mut totals: Vec<NamedTotal> =
        sums.into_iter().map(|(k, (energy_uj, samples))| NamedTotal { name: name(k), energy_uj, samples }).collect();
    sort_totals(&mut totals);
    totals
}

/// One thread's share of a cycle: its energy and its stacks' ids with their samples.
pub(super) struct Charge {
    pub pid: u32,
    pub tid: u32,
    /// Its row in `report.threads`.
    pub slot: Option<usize>,
    pub energy_uj: f64,
    pub stacks: Vec<(usize, u64)>,
}

pub(super) fn add_energy(
    table: &mut StackTable,
    cycle: &mut CycleSums,
    thread_methods: &mut HashMap<Arc<str>, (f64, u64)>,
    id: usize,
    energy_uj: f64,
    samples: u64,
) {
    table.add(id, energy_uj, samples);
    let entry = table.entry(id);
    add(cycle.all_methods.entry(entry.all_method.clone()).or_default(), energy_uj, samples);
    add(cycle.app_methods.entry(entry.app_method.clone()).or_default(), energy_uj, samples);
    add(cycle.all_trees.entry(id).or_default(), energy_uj, samples);
    add(cycle.app_trees.entry(entry.app_tree.clone()).or_default(), energy_uj, samples);
    add(thread_methods.entry(entry.all_method.clone()).or_default(), energy_uj, samples);
}

pub(super) fn push_methods(out: &mut Vec<MethodReport>, pid: u32, tid: u32, methods: HashMap<Arc<str>, (f64, u64)>) {
    for total in named(methods, |m| m) {
        out.push(MethodReport {
            pid,
            tid,
            method: total.name.to_string(),
            energy_uj: total.energy_uj,
            samples: total.samples,
        });
    }
}

pub(super) fn methods_only(mut totals: Vec<NamedTotal>) -> Vec<NamedTotal> {
    totals.retain(|t| is_method_name(&t.name));
    totals
}
