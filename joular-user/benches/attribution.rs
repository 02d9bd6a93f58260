//! One cycle's attribution at host scale: 10,000 threads on 64 CPUs over 2 sockets, each
//! thread on 1 to 3 CPUs (about 20,000 rows). Target: under 5 ms.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use joular_user::attribution::{attribute, IdleBaseline};
use joular_user::energy::{SocketEnergy, Topology};
use joular_user::model::{CpuTime, ThreadCpuTime};

const CPUS: u32 = 64;
const THREADS: u32 = 10_000;
const CYCLE_NS: u64 = 1_000_000_000;

fn inputs() -> (Vec<CpuTime>, Vec<ThreadCpuTime>, Topology, Vec<SocketEnergy>) {
    // Interleaved sockets (even CPUs on 0, odd on 1), as many two-socket machines number them.
    let topo = Topology::from_pairs((0..CPUS).map(|c| (c, c % 2)));
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut threads = Vec::new();
    for tid in 0..THREADS {
        for _ in 0..1 + next(3) {
            threads.push(ThreadCpuTime {
                pid: 1 + tid / 50,
                tid: 100 + tid,
                cpu: next(CPUS as u64) as u32,
                on_cpu_ns: next(CYCLE_NS / 100),
            });
        }
    }
    let cpus = (0..CPUS)
        .map(|cpu| {
            let busy_ns = next(CYCLE_NS);
            CpuTime { cpu, busy_ns, idle_ns: CYCLE_NS - busy_ns }
        })
        .collect();
    let sockets = (0..2).map(|socket| SocketEnergy { socket, energy_uj: 90e6, ..Default::default() }).collect();
    (cpus, threads, topo, sockets)
}

fn bench(c: &mut Criterion) {
    let (cpus, threads, topo, sockets) = inputs();
    let idle = IdleBaseline::new(None);
    c.bench_function("attribute 10k threads, 64 cpus, 2 sockets", |b| {
        b.iter(|| attribute(black_box(&cpus), black_box(&threads), &topo, black_box(&sockets), CYCLE_NS, &idle))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
