//! Run totals and the end-of-run summary printed to the terminal, from the attributed cycles
//! alone: what the energy and stack stages produced, never their own state.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use joular_user::attribution::stacks::methods::{is_method_name, top_user_frame};
use joular_user::attribution::stacks::AttributedCycle;
use joular_user::attribution::{TotalEnergy, Totals};
use joular_user::model::Stack;

use super::retire::Ended;

#[derive(Default)]
struct ThreadTotal {
    comm: String,
    on_cpu_ns: u64,
    samples: u64,
}

/// One row of the thread table: (pid, tid, totals, energy, sampled stacks).
type ThreadRow<'a> = (u32, u32, &'a ThreadTotal, TotalEnergy, Vec<(&'a Stack, u64)>);

/// A thread of a process that ended, set aside from later processes with its PID.
struct EndedThread {
    pid: u32,
    tid: u32,
    total: ThreadTotal,
    energy: TotalEnergy,
    stacks: Vec<(Stack, u64)>,
}

/// Totals over the whole run.
#[derive(Default)]
pub struct Summary {
    cycles: u64,
    first_start_ns: Option<u64>,
    last_end_ns: u64,
    /// By (pid, tid).
    threads: HashMap<(u32, u32), ThreadTotal>,
    /// Sample counts per (pid, tid, symbolized stack).
    stacks: HashMap<(u32, u32, Stack), u64>,
    /// Threads of processes that ended (`set_aside`).
    ended: Vec<EndedThread>,
    drops: HashMap<String, u64>,
    /// Energy per socket, process and thread over the cycles read.
    totals: Totals,
}

impl Summary {
    pub fn add(&mut self, cycle: &AttributedCycle) {
        let report = &cycle.report;
        self.totals.add(report);
        self.cycles += 1;
        self.first_start_ns.get_or_insert(report.start_ns);
        self.last_end_ns = report.end_ns;
        for t in &report.threads {
            let e = self.threads.entry((t.pid, t.tid)).or_default();
            if !t.comm.is_empty() {
                e.comm.clone_from(&t.comm);
            }
            e.on_cpu_ns += t.on_cpu_ns;
            e.samples += t.samples;
        }
        // Sampled call paths only: a thread's energy without a sample went to a bucket.
        for charge in &cycle.charges {
            for s in charge.stacks.iter().filter(|s| s.samples > 0) {
                *self.stacks.entry((charge.pid, charge.tid, s.stack.clone())).or_default() += s.samples;
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
        self.threads.retain(|&(pid, tid), _| !ended.pids.contains(&pid) && !ended.threads.contains(&(pid, tid)));
        let threads = &self.threads;
        self.stacks.retain(|(pid, tid, _), _| threads.contains_key(&(*pid, *tid)));
        self.totals.forget_processes(&ended.pids);
        self.totals.forget_threads(&ended.threads);
    }

    /// Keeps an ended process's threads and totals apart: a later process with the same PID is
    /// another process.
    pub fn set_aside(&mut self, pid: u32) {
        let totals = &self.totals;
        let tids: Vec<u32> = self.threads.keys().filter(|(p, _)| *p == pid).map(|&(_, tid)| tid).collect();
        for tid in tids {
            let total = self.threads.remove(&(pid, tid)).expect("listed above");
            let stacks = self
                .stacks
                .extract_if(|(p, t, _), _| (*p, *t) == (pid, tid))
                .map(|((_, _, stack), n)| (stack, n))
                .collect();
            let energy = totals.threads.get(&(pid, tid)).copied().unwrap_or_default();
            self.ended.push(EndedThread { pid, tid, total, energy, stacks });
        }
        self.totals.set_aside(pid);
    }

    pub fn render(&self, top: usize, source: &str, estimated: bool, detail: &str) -> String {
        let totals = &self.totals;
        let mut out = String::new();
        let secs = self.last_end_ns.saturating_sub(self.first_start_ns.unwrap_or(0)) as f64 / 1e9;
        let _ = writeln!(out, "\n== joular-ebpf summary: {} cycles, {secs:.2} s ==", self.cycles);
        let est = match (estimated, detail.is_empty()) {
            (true, _) => format!(" (ESTIMATED: no RAPL counter; {detail})"),
            (false, false) => format!(" ({detail})"),
            (false, true) => String::new(),
        };
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
                if s.flagged_cycles > 0 {
                    format!(", {} cycles flagged (counter went backwards)", s.flagged_cycles)
                } else {
                    String::new()
                }
            );
        }
        // An ended process (`(ended)`) and a later one with its PID are two lines.
        let ended = totals.ended.iter().map(|(pid, p, _)| (pid, p, " (ended)"));
        for (pid, p, note) in totals.processes.iter().map(|(pid, p)| (pid, p, "")).chain(ended) {
            let _ = writeln!(
                out,
                "process {pid}{note}: {:.3} J ({:.2} W), on-CPU {:.3} s",
                p.energy_j(),
                p.power_w(run_ns),
                p.on_cpu_ns as f64 / 1e9
            );
        }
        // (pid, tid, total, energy, stacks) of every thread, live or set aside.
        let live = self.threads.iter().map(|(&(pid, tid), t)| {
            let stacks: Vec<(&Stack, u64)> = self
                .stacks
                .iter()
                .filter(|((p, s, _), _)| (*p, *s) == (pid, tid))
                .map(|((_, _, st), n)| (st, *n))
                .collect();
            (pid, tid, t, totals.threads.get(&(pid, tid)).copied().unwrap_or_default(), stacks)
        });
        let ended = self
            .ended
            .iter()
            .map(|e| (e.pid, e.tid, &e.total, e.energy, e.stacks.iter().map(|(s, n)| (s, *n)).collect()));
        let mut threads: Vec<ThreadRow> = live.chain(ended).collect();
        threads.sort_by(|a, b| b.2.on_cpu_ns.cmp(&a.2.on_cpu_ns).then((a.0, a.1).cmp(&(b.0, b.1))));
        let total_samples: u64 = threads.iter().map(|t| t.2.samples).sum();
        let _ = writeln!(
            out,
            "\n{:>8} {:>8}  {:<20} {:>12} {:>8} {:>7} {:>10} {:>8}",
            "pid", "tid", "thread", "on-CPU (s)", "samples", "share", "energy (J)", "power (W)"
        );
        for (pid, tid, t, e, _) in threads.iter().take(top) {
            let share = if total_samples > 0 { 100.0 * t.samples as f64 / total_samples as f64 } else { 0.0 };
            let _ = writeln!(
                out,
                "{:>8} {:>8}  {:<20} {:>12.3} {:>8} {:>6.1}% {:>10.3} {:>8.2}",
                pid,
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
        for (_, tid, t, _, mine) in threads.iter().take(top.min(5)).filter(|t| t.2.samples > 0) {
            let _ = writeln!(out, "\n{} ({tid}): top leaf methods, then top stacks (leaf first)", t.comm);
            let mut leaves: HashMap<Arc<str>, u64> = HashMap::new();
            for (stack, n) in mine {
                *leaves.entry(top_user_frame(stack)).or_default() += n;
            }
            let mut mine = mine.clone();
            // Placeholders (`Interpreter`, `[unknown JIT code]`...) are degradations, not methods.
            let mut leaves: Vec<_> = leaves.into_iter().filter(|(name, _)| is_method_name(name)).collect();
            leaves.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            for (name, n) in leaves.iter().take(5) {
                let _ = writeln!(out, "  {:>5.1}%  {name}", 100.0 * *n as f64 / t.samples.max(1) as f64);
            }
            mine.sort_by_key(|m| std::cmp::Reverse(m.1));
            for (stack, n) in mine.iter().take(3) {
                // A Java stack starts at its first Java frame, as in every other output.
                let java_root = stack.iter().position(|f| f.kind.is_java()).unwrap_or(0);
                let frames: Vec<&str> = stack[java_root..].iter().rev().take(6).map(|f| &*f.short).collect();
                let _ = writeln!(out, "  {n:>6}  {}", frames.join(" <- "));
            }
        }
        let drops: u64 = self.drops.values().sum();
        if drops > 0 {
            let mut d: Vec<_> = self.drops.iter().collect();
            d.sort();
            let _ = writeln!(
                out,
                "\nDropped or degraded: {}",
                d.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use joular_user::attribution::stacks::{StackConfig, StackStage, ThreadStacks};
    use joular_user::model::{CycleReport, Frame, FrameKind, ProcessReport, ThreadReport, ThreadStack};

    fn cycle(pid: u32, comm: &str, frame: &str) -> (CycleReport, Vec<ThreadStacks>) {
        let report = CycleReport {
            threads: vec![ThreadReport {
                pid,
                tid: pid,
                comm: comm.into(),
                on_cpu_ns: 1_000_000_000,
                samples: 100,
                ..Default::default()
            }],
            ..Default::default()
        };
        let name: Arc<str> = Arc::from(frame);
        let stack: Stack = Arc::from([Frame::new(FrameKind::Native, name.clone(), name, None)]);
        (report, vec![(pid, pid, vec![ThreadStack { stack, samples: 100 }])])
    }

    /// The cycle as the stack stage hands it to the session.
    fn attributed(stage: &mut StackStage, (report, stacks): (CycleReport, Vec<ThreadStacks>)) -> AttributedCycle {
        stage.on_cycle(report, &stacks)
    }

    #[test]
    fn a_reused_pid_is_two_processes_in_the_summary() {
        let mut summary = Summary::default();
        let mut stage = StackStage::new(StackConfig::default());
        let (mut report, stacks) = cycle(7, "md5sum", "md5_process_block");
        report.threads[0].energy_uj = 2e6;
        report.processes = vec![ProcessReport { pid: 7, energy_uj: 2e6, on_cpu_ns: 1, ..Default::default() }];
        summary.add(&attributed(&mut stage, (report, stacks)));
        summary.set_aside(7);
        stage.set_aside(7);
        summary.add(&attributed(&mut stage, cycle(7, "sha256sum", "sha256_process_block")));
        let text = summary.render(10, "model", true, "utilisation (Cloud Carbon Footprint) model: test");
        assert!(text.contains("model (ESTIMATED: no RAPL counter; utilisation (Cloud Carbon Footprint) model: test)"));
        assert!(text.contains("process 7 (ended): 2.000 J"), "{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("7 ")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(rows.iter().any(|r| r.contains("md5sum") && r.contains("2.000")), "{text}");
        assert!(rows.iter().any(|r| r.contains("sha256sum") && r.contains("0.000")), "{text}");
        let md5 = text.find("md5sum (7)").expect("md5sum's stacks");
        let sha = text.find("sha256sum (7)").expect("sha256sum's stacks");
        let (first, second) = if md5 < sha { (&text[md5..sha], &text[sha..]) } else { (&text[md5..], &text[sha..md5]) };
        assert!(first.contains("md5_process_block") && !first.contains("sha256_process_block"), "{text}");
        assert!(second.contains("sha256_process_block") && !second.contains("md5_process_block"), "{text}");
    }

    /// The end-of-run stacks start at the first Java frame, and placeholders never rank as
    /// leaf methods.
    #[test]
    fn java_stacks_start_at_java_and_placeholders_do_not_rank() {
        let f = |name: &str, kind| Frame {
            name: Arc::from(name),
            short: Arc::from(name),
            kind,
            line: None,
            raw_name: None,
        };
        let java: Stack = Arc::from([
            f("start_thread", FrameKind::Native),
            f("JavaCalls::call_helper", FrameKind::Native),
            f("StubRoutines::call_stub", FrameKind::Stub),
            f("java.lang.Thread.run", FrameKind::JavaJit),
            f("Mix.alpha", FrameKind::JavaJit),
        ]);
        let interpreter: Stack =
            Arc::from([f("java.lang.Thread.run", FrameKind::JavaJit), f("Interpreter", FrameKind::Stub)]);
        let (mut report, _) = cycle(9, "worker", "x");
        report.threads[0].samples = 100;
        let stacks = vec![(
            9,
            9,
            vec![ThreadStack { stack: interpreter, samples: 60 }, ThreadStack { stack: java, samples: 40 }],
        )];
        let mut summary = Summary::default();
        summary.add(&attributed(&mut StackStage::new(StackConfig::default()), (report, stacks)));
        let text = summary.render(10, "model", true, "utilisation (Cloud Carbon Footprint) model: test");
        assert!(text.contains("Mix.alpha <- java.lang.Thread.run\n"), "{text}");
        assert!(!text.contains("call_stub") && !text.contains("call_helper"), "{text}");
        let leaves: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains('%'))
            .collect();
        assert!(leaves.iter().any(|l| l.ends_with("Mix.alpha")), "{text}");
        assert!(!leaves.iter().any(|l| l.ends_with("Interpreter")), "{text}");
    }
}
