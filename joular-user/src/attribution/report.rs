//! Writing a cycle's attribution into the JSON report model.

use std::collections::HashMap;

use crate::energy::SourceKind;
use crate::model::{CycleReport, ProcessReport, SocketReport, ThreadReport};

use super::Attribution;

impl Attribution {
    /// Fills `report.sockets` and `report.processes`, and `energy_uj`/`power_w` of every
    /// thread in `report.threads`. Attributed threads missing from the report are appended
    /// (without comm), so the report's threads always add up to the attributed energy.
    /// `estimated` comes from the source and labels every socket's figures.
    pub fn fill_report(&self, report: &mut CycleReport, source: SourceKind, estimated: bool) {
        report.sockets = self
            .sockets
            .iter()
            .map(|s| SocketReport {
                socket: s.socket,
                energy_uj: s.energy_uj,
                source: source.as_str().to_owned(),
                estimated,
                unattributed_uj: s.unattributed_uj,
                power_w: s.power_w,
                dynamic_energy_uj: s.dynamic_energy_uj,
                dram_energy_uj: s.dram_energy_uj,
                flagged: s.flagged,
            })
            .collect();

        let position: HashMap<(u32, u32), usize> =
            report.threads.iter().enumerate().map(|(i, t)| ((t.pid, t.tid), i)).collect();
        let mut seen = vec![false; report.threads.len()];
        for t in &self.threads {
            match position.get(&(t.pid, t.tid)) {
                Some(&i) => {
                    report.threads[i].energy_uj = t.energy_uj;
                    report.threads[i].power_w = t.power_w;
                    seen[i] = true;
                }
                None => report.threads.push(ThreadReport {
                    pid: t.pid,
                    tid: t.tid,
                    on_cpu_ns: t.on_cpu_ns,
                    energy_uj: t.energy_uj,
                    power_w: t.power_w,
                    ..Default::default()
                }),
            }
        }
        // A reported thread attribution never saw (no on-CPU time) took no energy.
        for (thread, seen) in report.threads.iter_mut().zip(seen) {
            if !seen {
                thread.energy_uj = 0.0;
                thread.power_w = 0.0;
            }
        }

        // A process is named after its main thread (tid == pid), else after any thread.
        let mut comm: HashMap<u32, &str> = HashMap::new();
        for t in &report.threads {
            if t.tid == t.pid || !comm.contains_key(&t.pid) {
                comm.insert(t.pid, &t.comm);
            }
        }
        report.processes = self
            .processes
            .iter()
            .map(|p| ProcessReport {
                pid: p.pid,
                comm: comm.get(&p.pid).map(|c| c.to_string()).unwrap_or_default(),
                energy_uj: p.energy_uj,
                power_w: p.power_w,
                on_cpu_ns: p.on_cpu_ns,
                ..Default::default()
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::{attribute, IdleBaseline};
    use crate::energy::{SocketEnergy, Topology};
    use crate::model::{CpuTime, ThreadCpuTime};

    #[test]
    fn fills_sockets_processes_and_threads_with_the_json_names() {
        let sec = 1_000_000_000;
        let topo = Topology::from_pairs([(0, 0)]);
        let cpus = [CpuTime { cpu: 0, busy_ns: sec, idle_ns: 0 }];
        let rows = [
            ThreadCpuTime { pid: 5, tid: 5, cpu: 0, on_cpu_ns: sec / 4 },
            ThreadCpuTime { pid: 5, tid: 6, cpu: 0, on_cpu_ns: sec / 4 },
        ];
        let reading = SocketEnergy { socket: 0, energy_uj: 8e6, ..Default::default() };
        let a = attribute(&cpus, &rows, &topo, &[reading], sec, &IdleBaseline::new(None));
        let mut report = CycleReport {
            threads: vec![
                ThreadReport { pid: 5, tid: 6, comm: "worker".into(), ..Default::default() },
                ThreadReport { pid: 5, tid: 5, comm: "java".into(), ..Default::default() },
                ThreadReport { pid: 5, tid: 9, comm: "idle".into(), energy_uj: 3.0, ..Default::default() },
            ],
            ..Default::default()
        };
        a.fill_report(&mut report, SourceKind::Model, true);
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        let socket = &json["sockets"][0];
        assert_eq!(socket["source"], "model");
        assert_eq!(socket["estimated"], true);
        assert_eq!(socket["energy_uj"].as_f64(), Some(8e6));
        assert_eq!(socket["unattributed_uj"].as_f64(), Some(a.sockets[0].unattributed_uj));
        assert_eq!(json["processes"][0]["pid"], 5);
        assert_eq!(json["processes"][0]["comm"], "java");
        assert_eq!(json["processes"][0]["energy_uj"].as_f64(), Some(a.processes[0].energy_uj));
        let energy_of = |tid: u32| report.threads.iter().find(|t| t.tid == tid).unwrap().energy_uj;
        assert_eq!(energy_of(5), a.threads[0].energy_uj);
        assert_eq!(energy_of(6), a.threads[1].energy_uj);
        assert_eq!(energy_of(9), 0.0);
        assert_eq!(report.threads.len(), 3);
    }
}
