//! The processes a set of processes has started, from `/proc/<pid>/stat`'s ppid field: what
//! `--follow-children` adds at start, when a target's children were forked before the fork
//! hook was attached (the kernel follows only forks after it).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

/// A stat line is one line of at most a few hundred bytes; more is not a stat file.
const MAX_STAT_BYTES: u64 = 4096;
/// /proc holds at most `pid_max` (4,194,304) processes; past this many entries the scan stops
/// rather than hold an unbounded map.
const MAX_PROCESSES: usize = 1 << 22;

/// The ppid of `/proc/<pid>/stat`'s line: the field after the state, counted from the last
/// `)` (a comm may hold spaces and parentheses).
pub fn parse_ppid(line: &str) -> Option<u32> {
    let close = line.rfind(')')?;
    line[close + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Every process under `proc_root` whose ancestry reaches one of `roots`, roots excluded,
/// in ascending order. Processes that end during the scan are left out.
pub fn descendants(proc_root: &Path, roots: &[u32]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in entries.flatten().take(MAX_PROCESSES) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some(ppid) = read_stat(&entry.path().join("stat")).as_deref().and_then(parse_ppid) else {
            continue;
        };
        children.entry(ppid).or_default().push(pid);
    }
    let roots: HashSet<u32> = roots.iter().copied().collect();
    let mut found = HashSet::new();
    let mut queue: Vec<u32> = roots.iter().copied().collect();
    while let Some(parent) = queue.pop() {
        for &child in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
            if !roots.contains(&child) && found.insert(child) {
                queue.push(child);
            }
        }
    }
    let mut out: Vec<u32> = found.into_iter().collect();
    out.sort_unstable();
    out
}

fn read_stat(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(MAX_STAT_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(root: &Path, pid: u32, comm: &str, ppid: u32) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 0\n")).unwrap();
    }

    #[test]
    fn children_and_grandchildren_are_found_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        process(root.path(), 1, "init", 0);
        process(root.path(), 100, "sh", 1);
        process(root.path(), 101, "java", 100);
        process(root.path(), 102, "a) S 1 (b", 101);
        process(root.path(), 200, "other", 1);
        process(root.path(), 201, "other child", 200);
        std::fs::create_dir_all(root.path().join("self")).unwrap();
        std::fs::create_dir_all(root.path().join("300")).unwrap();
        std::fs::write(root.path().join("301"), "not a directory").unwrap();
        assert_eq!(descendants(root.path(), &[100]), [101, 102]);
        assert_eq!(descendants(root.path(), &[100, 101]), [102]);
        assert_eq!(descendants(root.path(), &[999]), Vec::<u32>::new());
        assert_eq!(descendants(&root.path().join("missing"), &[100]), Vec::<u32>::new());
    }

    #[test]
    fn the_ppid_is_read_after_the_last_parenthesis() {
        assert_eq!(parse_ppid("7 (x) (y) R 42 7 7"), Some(42));
        assert_eq!(parse_ppid("7 (x"), None);
        assert_eq!(parse_ppid("7 (x) R"), None);
    }
}
