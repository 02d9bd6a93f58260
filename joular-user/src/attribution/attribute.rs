//! The per-cycle split: per-CPU shares, per-socket scale, then one pass over thread rows.

use std::collections::HashMap;

use crate::energy::{SocketEnergy, Topology};
use crate::model::{CpuTime, ThreadCpuTime};

use super::{power_w, Attribution, IdleBaseline, ProcessEnergy, SocketAttribution, ThreadEnergy};

/// Splits each socket's energy among the monitored threads (see the module docs for the
/// formula). `threads` holds one row per (thread, CPU) with the thread's on-CPU time there;
/// `cpus` each CPU's busy and idle time over the same cycle; `sockets` the energy source's
/// reading for this cycle; `duration_ns` the cycle's wall length (for power).
///
/// A thread on a CPU the topology does not know gets no energy (its socket is unknown), and a
/// socket without a reading has none to give. Nothing returned is ever negative.
pub fn attribute(
    cpus: &[CpuTime],
    threads: &[ThreadCpuTime],
    topo: &Topology,
    sockets: &[SocketEnergy],
    duration_ns: u64,
    idle: &IdleBaseline,
) -> Attribution {
    let max_cpu = cpus.iter().map(|c| c.cpu).chain(threads.iter().map(|t| t.cpu)).max();
    let slots = topo.cpu_slots().max(max_cpu.map_or(0, |c| c as usize + 1));

    // Σ t_task' on c over monitored tasks: may exceed busy_c when the counters of a cycle are
    // not perfectly aligned, which the max() in the denominator absorbs.
    let mut monitored_ns = vec![0u64; slots];
    for t in threads {
        monitored_ns[t.cpu as usize] = monitored_ns[t.cpu as usize].saturating_add(t.on_cpu_ns);
    }
    let mut busy_total_ns = vec![(0u64, 0u64); slots];
    for c in cpus {
        let slot = &mut busy_total_ns[c.cpu as usize];
        slot.0 = slot.0.saturating_add(c.busy_ns);
        slot.1 = slot.1.saturating_add(c.total_ns());
    }

    let mut by_socket: Vec<SocketEnergy> = sockets.to_vec();
    by_socket.sort_by_key(|s| s.socket);
    let socket_index: Vec<Option<usize>> = (0..slots)
        .map(|c| topo.socket_of(c as u32).and_then(|s| by_socket.binary_search_by_key(&s, |r| r.socket).ok()))
        .collect();

    // Per CPU: the denominator of A, and every task's share together, summed per socket.
    let mut denominator = vec![1.0f64; slots];
    let mut share_sum = vec![0.0f64; by_socket.len()];
    for c in 0..slots {
        let (busy, total) = busy_total_ns[c];
        let all_tasks_ns = busy.max(monitored_ns[c]);
        let d = 1u64.max(total).max(all_tasks_ns) as f64;
        denominator[c] = d;
        if let Some(i) = socket_index[c] {
            share_sum[i] += all_tasks_ns as f64 / d;
        }
    }

    let mut out_sockets: Vec<SocketAttribution> = by_socket
        .iter()
        .map(|r| {
            let energy_uj = if r.flagged { 0.0 } else { r.energy_uj.max(0.0) };
            let idle_power_w = idle.idle_power_w(r.socket);
            // W · ns / 1e3 = µJ.
            let dynamic_energy_uj = (energy_uj - idle_power_w * duration_ns as f64 / 1e3).max(0.0);
            SocketAttribution {
                socket: r.socket,
                energy_uj,
                dynamic_energy_uj,
                idle_power_w,
                dram_energy_uj: r.dram_energy_uj,
                psys_energy_uj: r.psys_energy_uj,
                flagged: r.flagged,
                power_w: power_w(energy_uj, duration_ns),
                ..Default::default()
            }
        })
        .collect();
    // Energy per ns of task time on each CPU: E_s / max(1, ΣA) / denominator_c.
    let per_ns: Vec<(f64, f64)> = (0..slots)
        .map(|c| match socket_index[c] {
            Some(i) => {
                let k = share_sum[i].max(1.0) * denominator[c];
                (out_sockets[i].energy_uj / k, out_sockets[i].dynamic_energy_uj / k)
            }
            None => (0.0, 0.0),
        })
        .collect();

    let mut index: HashMap<(u32, u32), usize> = HashMap::with_capacity(threads.len());
    let mut out_threads: Vec<ThreadEnergy> = Vec::with_capacity(threads.len());
    let mut attributed = vec![(0.0f64, 0.0f64); out_sockets.len()];
    for t in threads {
        let c = t.cpu as usize;
        let (energy_uj, dynamic_energy_uj) = (t.on_cpu_ns as f64 * per_ns[c].0, t.on_cpu_ns as f64 * per_ns[c].1);
        if let Some(i) = socket_index[c] {
            attributed[i].0 += energy_uj;
            attributed[i].1 += dynamic_energy_uj;
        }
        let at = *index.entry((t.pid, t.tid)).or_insert_with(|| {
            out_threads.push(ThreadEnergy { pid: t.pid, tid: t.tid, ..Default::default() });
            out_threads.len() - 1
        });
        let entry = &mut out_threads[at];
        entry.on_cpu_ns += t.on_cpu_ns;
        entry.energy_uj += energy_uj;
        entry.dynamic_energy_uj += dynamic_energy_uj;
    }
    for (s, (energy_uj, dynamic_uj)) in out_sockets.iter_mut().zip(attributed) {
        // Rounding can push the sum a hair past E_s; the remainder is never negative.
        s.attributed_uj = energy_uj.min(s.energy_uj);
        s.unattributed_uj = (s.energy_uj - energy_uj).max(0.0);
        s.dynamic_unattributed_uj = (s.dynamic_energy_uj - dynamic_uj).max(0.0);
    }
    out_threads.sort_unstable_by_key(|t| (t.pid, t.tid));
    let mut processes: Vec<ProcessEnergy> = Vec::new();
    for t in &mut out_threads {
        t.power_w = power_w(t.energy_uj, duration_ns);
        match processes.last_mut() {
            Some(p) if p.pid == t.pid => {
                p.on_cpu_ns += t.on_cpu_ns;
                p.energy_uj += t.energy_uj;
                p.dynamic_energy_uj += t.dynamic_energy_uj;
            }
            _ => processes.push(ProcessEnergy {
                pid: t.pid,
                on_cpu_ns: t.on_cpu_ns,
                energy_uj: t.energy_uj,
                dynamic_energy_uj: t.dynamic_energy_uj,
                power_w: 0.0,
            }),
        }
    }
    for p in &mut processes {
        p.power_w = power_w(p.energy_uj, duration_ns);
    }
    Attribution { duration_ns, threads: out_threads, processes, sockets: out_sockets }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn cpu(cpu: u32, busy_ns: u64, total_ns: u64) -> CpuTime {
        CpuTime { cpu, busy_ns, idle_ns: total_ns - busy_ns }
    }

    fn row(pid: u32, tid: u32, cpu: u32, on_cpu_ns: u64) -> ThreadCpuTime {
        ThreadCpuTime { pid, tid, cpu, on_cpu_ns }
    }

    fn reading(socket: u32, energy_uj: f64) -> SocketEnergy {
        SocketEnergy { socket, energy_uj, ..Default::default() }
    }

    fn thread(a: &Attribution, tid: u32) -> ThreadEnergy {
        *a.threads.iter().find(|t| t.tid == tid).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn busy_socket_is_split_by_share_and_others_keep_theirs() {
        // One socket, two CPUs, 1 s. CPU 0: thread 1 ran 0.5 s, an unmonitored task 0.3 s.
        // CPU 1: thread 2 ran 0.25 s. ΣA = 0.8 + 0.25 > 1, so it divides E_s.
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let cpus = [cpu(0, 800_000_000, SEC), cpu(1, 250_000_000, SEC)];
        let threads = [row(10, 1, 0, 500_000_000), row(10, 2, 1, 250_000_000)];
        let e_s = 42e6;
        let a = attribute(&cpus, &threads, &topo, &[reading(0, e_s)], SEC, &IdleBaseline::new(None));
        let (t1, t2) = (thread(&a, 1), thread(&a, 2));
        assert!(close(t1.energy_uj, 2.0 * t2.energy_uj));
        // The unmonitored 0.3 s is 0.3/0.5 of thread 1's share.
        assert!(close(a.sockets[0].unattributed_uj, t1.energy_uj * 0.3 / 0.5));
        assert!(close(t1.energy_uj + t2.energy_uj + a.sockets[0].unattributed_uj, e_s));
        assert!(close(t1.power_w, t1.energy_uj / 1e6));
        assert_eq!(a.processes.len(), 1);
        assert!(close(a.processes[0].energy_uj, t1.energy_uj + t2.energy_uj));
    }

    #[test]
    fn mostly_idle_socket_gives_a_task_its_plain_share() {
        // ΣA < 1: the max(1, ΣA) keeps a lone task from taking the idle socket's energy.
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let cpus = [cpu(0, 100_000_000, SEC), cpu(1, 0, SEC)];
        let e_s = 10e6;
        let a =
            attribute(&cpus, &[row(1, 1, 0, 100_000_000)], &topo, &[reading(0, e_s)], SEC, &IdleBaseline::new(None));
        assert!(close(a.threads[0].energy_uj, e_s * 0.1));
        assert!(close(a.sockets[0].unattributed_uj, e_s * 0.9));
    }

    #[test]
    fn two_sockets_keep_their_energy_apart_and_a_migrating_thread_sums_both() {
        let topo = Topology::from_pairs([(0, 0), (1, 1), (2, 0), (3, 1)]);
        let cpus: Vec<_> = (0..4).map(|c| cpu(c, SEC, SEC)).collect();
        // Thread 1 only on socket 0; thread 2 on socket 1; thread 3 half a second on each.
        let threads = [
            row(1, 1, 0, SEC),
            row(1, 1, 2, SEC / 2),
            row(2, 2, 1, SEC),
            row(2, 2, 3, SEC / 2),
            row(2, 3, 2, SEC / 2),
            row(2, 3, 3, SEC / 2),
        ];
        let (e0, e1) = (100e6, 40e6);
        let a = attribute(&cpus, &threads, &topo, &[reading(1, e1), reading(0, e0)], SEC, &IdleBaseline::new(None));
        assert_eq!(a.sockets.iter().map(|s| s.socket).collect::<Vec<_>>(), vec![0, 1]);
        // Each socket is fully busy with monitored tasks: ΣA = 2, all of E_s is attributed.
        assert!(close(thread(&a, 1).energy_uj, e0 * 1.5 / 2.0));
        assert!(close(thread(&a, 2).energy_uj, e1 * 1.5 / 2.0));
        assert!(close(thread(&a, 3).energy_uj, e0 * 0.5 / 2.0 + e1 * 0.5 / 2.0));
        assert!(a.sockets.iter().all(|s| s.unattributed_uj < 1e-6));
        assert_eq!(a.processes.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn flagged_socket_gives_nothing_and_loses_nothing() {
        let topo = Topology::from_pairs([(0, 0)]);
        let flagged = SocketEnergy { socket: 0, energy_uj: 0.0, flagged: true, ..Default::default() };
        let a = attribute(&[cpu(0, SEC, SEC)], &[row(1, 1, 0, SEC)], &topo, &[flagged], SEC, &IdleBaseline::new(None));
        assert_eq!(a.threads[0].energy_uj, 0.0);
        assert_eq!(a.threads[0].on_cpu_ns, SEC);
        assert!(a.sockets[0].flagged && a.sockets[0].unattributed_uj == 0.0);
    }

    #[test]
    fn misaligned_counters_cannot_give_more_than_the_socket() {
        // Thread time exceeds the CPU's cycle (counters read at slightly different instants).
        let topo = Topology::from_pairs([(0, 0)]);
        let threads = [row(1, 1, 0, SEC), row(1, 2, 0, SEC / 2)];
        let a = attribute(&[cpu(0, SEC / 2, SEC)], &threads, &topo, &[reading(0, 9e6)], SEC, &IdleBaseline::new(None));
        let sum: f64 = a.threads.iter().map(|t| t.energy_uj).sum();
        assert!(close(sum + a.sockets[0].unattributed_uj, 9e6));
        assert!(close(thread(&a, 1).energy_uj, 2.0 * thread(&a, 2).energy_uj));
    }

    #[test]
    fn dynamic_view_subtracts_the_baseline_and_splits_alike() {
        let topo = Topology::from_pairs([(0, 0)]);
        let (e_s, idle_w) = (30e6, 10.0);
        let a = attribute(
            &[cpu(0, SEC / 2, SEC)],
            &[row(1, 1, 0, SEC / 2)],
            &topo,
            &[reading(0, e_s)],
            SEC,
            &IdleBaseline::new(Some(idle_w)),
        );
        let s = a.sockets[0];
        assert!(close(s.dynamic_energy_uj, e_s - idle_w * 1e6));
        assert!(close(a.threads[0].dynamic_energy_uj / a.threads[0].energy_uj, s.dynamic_energy_uj / e_s));
        assert!(close(a.threads[0].dynamic_energy_uj + s.dynamic_unattributed_uj, s.dynamic_energy_uj));
        // A baseline above the reading gives no dynamic energy, never negative.
        let low = attribute(&[cpu(0, 0, SEC)], &[], &topo, &[reading(0, 1e6)], SEC, &IdleBaseline::new(Some(idle_w)));
        assert_eq!(low.sockets[0].dynamic_energy_uj, 0.0);
    }

    #[test]
    fn unknown_cpu_and_unread_socket_attribute_nothing() {
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let threads = [row(1, 1, 7, SEC), row(1, 2, 1, SEC)];
        let a = attribute(
            &[cpu(0, SEC, SEC), cpu(1, SEC, SEC)],
            &threads,
            &topo,
            &[reading(0, 5e6)],
            SEC,
            &IdleBaseline::new(None),
        );
        assert!(a.threads.iter().all(|t| t.energy_uj == 0.0));
        assert!(close(a.sockets[0].unattributed_uj, 5e6));
    }

    /// xorshift64*: deterministic random inputs without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn conservation_and_no_negative_over_random_cycles() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..2_000 {
            let n_cpus = 1 + rng.below(8) as u32;
            let n_sockets = 1 + rng.below(3) as u32;
            let topo = Topology::from_pairs((0..n_cpus).map(|c| (c, c % n_sockets)));
            let cycle_ns = 1 + rng.below(2 * SEC);
            // Some CPUs report nothing; totals jitter around the cycle as jiffies do.
            let cpus: Vec<_> = (0..n_cpus)
                .filter_map(|c| {
                    let total = cycle_ns / 2 + rng.below(cycle_ns);
                    (rng.below(8) != 0).then(|| cpu(c, rng.below(total + 1), total))
                })
                .collect();
            // Thread time may exceed the CPU's own (misalignment), and CPUs beyond the topology appear.
            let threads: Vec<_> = (0..rng.below(40))
                .map(|_| {
                    row(
                        1 + rng.below(4) as u32,
                        rng.below(20) as u32,
                        rng.below(n_cpus as u64 + 2) as u32,
                        rng.below(cycle_ns * 3 / 2),
                    )
                })
                .collect();
            let sockets: Vec<_> = (0..n_sockets)
                .filter_map(|s| {
                    let energy_uj = rng.below(200_000_000) as f64;
                    let flagged = rng.below(10) == 0;
                    (rng.below(6) != 0).then_some(SocketEnergy { socket: s, energy_uj, flagged, ..Default::default() })
                })
                .collect();
            let idle = IdleBaseline::new((rng.below(2) == 0).then(|| rng.below(100) as f64));
            let a = attribute(&cpus, &threads, &topo, &sockets, cycle_ns, &idle);

            for s in &a.sockets {
                assert!(s.energy_uj >= 0.0 && s.unattributed_uj >= 0.0 && s.dynamic_unattributed_uj >= 0.0);
                assert!(s.dynamic_energy_uj <= s.energy_uj + 1e-9);
                assert!(close(s.attributed_uj + s.unattributed_uj, s.energy_uj), "{s:?}");
                if s.flagged {
                    assert_eq!(s.energy_uj, 0.0);
                }
            }
            let thread_sum: f64 = a.threads.iter().map(|t| t.energy_uj).sum();
            let attributed_sum: f64 = a.sockets.iter().map(|s| s.attributed_uj).sum();
            let e_sum: f64 = a.sockets.iter().map(|s| s.energy_uj).sum();
            assert!(close(thread_sum + a.sockets.iter().map(|s| s.unattributed_uj).sum::<f64>(), e_sum), "{a:?}");
            assert!(close(thread_sum, attributed_sum));
            let process_sum: f64 = a.processes.iter().map(|p| p.energy_uj).sum();
            assert!(close(process_sum, thread_sum));
            assert!(a.threads.iter().all(|t| t.energy_uj >= 0.0 && t.dynamic_energy_uj >= 0.0 && t.power_w >= 0.0));
            let on_cpu: u64 = threads.iter().map(|t| t.on_cpu_ns).sum();
            assert_eq!(a.threads.iter().map(|t| t.on_cpu_ns).sum::<u64>(), on_cpu);
        }
    }
}
