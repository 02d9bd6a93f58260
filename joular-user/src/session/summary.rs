//! Run totals and the end-of-run summary printed to the terminal.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use joular_user::attribution::Totals;
use joular_user::model::{CycleReport, Stack};
use joular_user::output::methods::top_user_frame;

use joular_user::output::ThreadStacks;

use super::retire::Ended;

#[derive(Default)]
struct ThreadTotal {
    pid: u32,
    comm: String,
    on_cpu_ns: u64,
    samples: u64,
}

/// Totals over the whole run.
#[derive(Default)]
pub struct Summary {
    cycles: u64,
    first_start_ns: Option<u64>,
    last_end_ns: u64,
    threads: HashMap<u32, ThreadTotal>,
    /// Sample counts per (tid, symbolized stack).
    stacks: HashMap<(u32, Stack), u64>,
    drops: HashMap<String, u64>,
}

impl Summary {
    pub fn add(&mut self, report: &CycleReport, stacks: &[ThreadStacks]) {
        self.cycles += 1;
        self.first_start_ns.get_or_insert(report.start_ns);
        self.last_end_ns = report.end_ns;
        for t in &report.threads {
            let e = self.threads.entry(t.tid).or_default();
            e.pid = t.pid;
            if !t.comm.is_empty() {
                e.comm.clone_from(&t.comm);
            }
            e.on_cpu_ns += t.on_cpu_ns;
            e.samples += t.samples;
        }
        for (_, tid, thread_stacks) in stacks {
            for s in thread_stacks {
                *self.stacks.entry((*tid, s.stack.clone())).or_default() += s.samples;
            }
        }
        for (k, v) in &report.drops {
            *self.drops.entry(k.clone()).or_default() += v;
        }
    }

    /// Drops what is held for ended processes and exited threads (serve mode keeps only live ones).
    pub fn forget(&mut self, ended: &Ended) {
        // Called every cycle: most cycles end nothing, and the retains walk every stack.
        if ended.pids.is_empty() && ended.threads.is_empty() {
            return;
        }
        self.threads.retain(|tid, t| !ended.pids.contains(&t.pid) && !ended.threads.contains(&(t.pid, *tid)));
        let threads = &self.threads;
        self.stacks.retain(|(tid, _), _| threads.contains_key(tid));
    }

    pub fn render(&self, top: usize, totals: &Totals, source: &str, estimated: bool) -> String {
        let mut out = String::new();
        let secs = self.last_end_ns.saturating_sub(self.first_start_ns.unwrap_or(0)) as f64 / 1e9;
        let _ = writeln!(out, "\n== joular-ebpf summary: {} cycles, {secs:.2} s ==", self.cycles);
        let est = if estimated { " (ESTIMATED: no RAPL counter, TDP model)" } else { "" };
        let run_ns = totals.duration_ns.max(1);
        let _ = writeln!(out, "Energy source: {source}{est}");
        for (socket, s) in &totals.sockets {
            let _ = writeln!(
                out,
                "socket {socket}: {:.3} J ({:.2} W), unattributed {:.3} J, dynamic {:.3} J{}",
                s.energy_uj / 1e6,
                totals.socket_power_w(*socket),
                s.unattributed_uj / 1e6,
                s.dynamic_energy_uj / 1e6,
                if s.flagged_cycles > 0 { format!(", {} cycles flagged (counter went backwards)", s.flagged_cycles) } else { String::new() }
            );
        }
        for (pid, p) in &totals.processes {
            let _ = writeln!(out, "process {pid}: {:.3} J ({:.2} W), on-CPU {:.3} s", p.energy_j(), p.power_w(run_ns), p.on_cpu_ns as f64 / 1e9);
        }
        let mut threads: Vec<_> = self.threads.iter().collect();
        threads.sort_by(|a, b| b.1.on_cpu_ns.cmp(&a.1.on_cpu_ns).then(a.0.cmp(b.0)));
        let total_samples: u64 = self.threads.values().map(|t| t.samples).sum();
        let _ = writeln!(
            out,
            "\n{:>8} {:>8}  {:<20} {:>12} {:>8} {:>7} {:>10} {:>8}",
            "pid", "tid", "thread", "on-CPU (s)", "samples", "share", "energy (J)", "power (W)"
        );
        for (tid, t) in threads.iter().take(top) {
            let share = if total_samples > 0 { 100.0 * t.samples as f64 / total_samples as f64 } else { 0.0 };
            let e = totals.threads.get(&(t.pid, **tid)).copied().unwrap_or_default();
            let _ = writeln!(
                out,
                "{:>8} {:>8}  {:<20} {:>12.3} {:>8} {:>6.1}% {:>10.3} {:>8.2}",
                t.pid,
                tid,
                truncate(&t.comm, 20),
                t.on_cpu_ns as f64 / 1e9,
                t.samples,
                share,
                e.energy_j(),
                e.power_w(run_ns)
            );
        }
        if threads.len() > top {
            let _ = writeln!(out, "  ... {} more threads (--top N shows more)", threads.len() - top);
        }
        for (tid, t) in threads.iter().take(top.min(5)).filter(|(_, t)| t.samples > 0) {
            let _ = writeln!(out, "\n{} ({tid}): top leaf methods, then top stacks (leaf first)", t.comm);
            let mut leaves: HashMap<Arc<str>, u64> = HashMap::new();
            let mut mine: Vec<(&Stack, u64)> = Vec::new();
            for ((stid, stack), n) in &self.stacks {
                if stid == *tid {
                    *leaves.entry(top_user_frame(stack)).or_default() += n;
                    mine.push((stack, *n));
                }
            }
            let mut leaves: Vec<_> = leaves.into_iter().collect();
            leaves.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            for (name, n) in leaves.iter().take(5) {
                let _ = writeln!(out, "  {:>5.1}%  {name}", 100.0 * *n as f64 / t.samples.max(1) as f64);
            }
            mine.sort_by(|a, b| b.1.cmp(&a.1));
            for (stack, n) in mine.iter().take(3) {
                let frames: Vec<&str> = stack.iter().rev().take(6).map(|f| &*f.short).collect();
                let _ = writeln!(out, "  {n:>6}  {}", frames.join(" <- "));
            }
        }
        let drops: u64 = self.drops.values().sum();
        if drops > 0 {
            let mut d: Vec<_> = self.drops.iter().collect();
            d.sort();
            let _ = writeln!(out, "\nDropped or degraded: {}", d.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "));
        }
        out
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
