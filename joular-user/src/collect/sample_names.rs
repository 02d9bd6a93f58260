//! Threads named as they were when sampled (each sample carries its thread's comm): a thread
//! that renames itself, or ends before user space reads its name, is reported under the name it
//! had when it ran, not the one it had when it first ran in the cycle (a new JVM thread runs as
//! "java" until the JVM names it).

use std::collections::HashMap;

use joular_ebpf::SampleKey;

use super::cpu_time::comm_str;

/// (tid, process start tick) → (pid, comm).
pub type ThreadNames = HashMap<(u32, u32), (u32, String)>;

/// Per thread: samples and pid by comm.
type NameCounts = HashMap<[u8; 16], (u32, u64)>;

/// Each thread's name from a cycle's samples: the name with the most
/// samples when a thread had several, the first in byte order between equals. Samples whose
/// name the kernel could not read name nothing.
pub fn from_samples<'a>(entries: impl IntoIterator<Item = &'a (SampleKey, u64)>) -> ThreadNames {
    let mut counts: HashMap<(u32, u32), NameCounts> = HashMap::new();
    for (key, count) in entries {
        if key.comm[0] == 0 {
            continue;
        }
        let names = counts.entry((key.tid, key.start_ticks)).or_default();
        names.entry(key.comm).or_insert((key.tgid, 0)).1 += count;
    }
    counts
        .into_iter()
        .filter_map(|(thread, names)| {
            let (comm, (pid, _)) = names.into_iter().max_by(|a, b| a.1 .1.cmp(&b.1 .1).then(b.0.cmp(&a.0)))?;
            Some((thread, (pid, comm_str(&comm))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tid: u32, start_ticks: u32, comm: &str) -> SampleKey {
        let mut name = [0u8; 16];
        name[..comm.len()].copy_from_slice(comm.as_bytes());
        SampleKey {
            tgid: 7,
            tid,
            cpu: 0,
            user_stack_id: -1,
            kernel_stack_id: -1,
            start_ticks,
            java_stack_hash: 0,
            java_leaf: Default::default(),
            comm: name,
        }
    }

    #[test]
    fn a_renamed_thread_takes_its_most_sampled_name_and_an_unread_name_names_nothing() {
        let entries = [
            (key(8, 100, "java"), 2),
            (key(8, 100, "renamer-b"), 3),
            (key(8, 100, "renamer-b"), 1),
            (key(9, 100, "b"), 2),
            (key(9, 100, "a"), 2),
            (key(10, 100, ""), 5),
            (key(8, 900, "impostor"), 1),
        ];
        let names = from_samples(&entries);
        assert_eq!(names[&(8, 100)], (7, "renamer-b".to_string()));
        assert_eq!(names[&(9, 100)], (7, "a".to_string()), "equals: the first in byte order");
        assert_eq!(names[&(8, 900)], (7, "impostor".to_string()), "another process with this tid");
        assert!(!names.contains_key(&(10, 100)));
    }
}
