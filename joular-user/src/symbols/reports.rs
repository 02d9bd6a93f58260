//! The sampler's reports of code it met for the first time (`joular_ebpf::CodeReport`), handed
//! to each JVM's HotSpot reader to name while the JVM still has the code
//! ([`super::hotspot::HotspotProcess::learn`]).

use std::collections::BTreeMap;

use joular_ebpf::CodeReport;

use super::hotspot::HotspotProcess;
use super::Symbolizer;

impl Symbolizer {
    /// Names the reported code, one job per JVM. Reports of processes not read through their
    /// HotSpot tables (or not known) are dropped: nothing names their frames by `Method*`.
    pub fn learn_code(&mut self, reports: Vec<CodeReport>) {
        self.stats.code_reports += reports.len() as u64;
        let mut by_pid: BTreeMap<u32, Vec<CodeReport>> = BTreeMap::new();
        for r in reports {
            by_pid.entry(r.tgid).or_default().push(r);
        }
        for (pid, reports) in by_pid {
            if let Some(named) = self.hotspot_job(pid, |h| HotspotProcess::learn_in_job(h, reports)) {
                self.stats.code_reports_named += named;
            }
        }
    }
}
