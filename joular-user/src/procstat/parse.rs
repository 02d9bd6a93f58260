//! Pure parsers for /proc/stat and /proc/<pid>/task/<tid>/stat.

/// One `cpuN` line of /proc/stat, in jiffies (USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuJiffies {
    pub cpu: u32,
    pub busy: u64,
    /// `idle + iowait`: iowait is idle time spent waiting, not running anything.
    pub idle: u64,
}

/// `cpuN user nice system idle iowait irq softirq steal guest guest_nice`. guest and
/// guest_nice are already inside user and nice, so they are not added again. The aggregate
/// `cpu` line is skipped.
pub fn parse_proc_stat(text: &str) -> Vec<CpuJiffies> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let values: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
            let get = |i: usize| values.get(i).copied().unwrap_or(0);
            let idle = get(3) + get(4);
            let total: u64 = values.iter().sum();
            Some(CpuJiffies { cpu, busy: total - idle, idle })
        })
        .collect()
}

/// The fields of a task's stat line that CPU accounting needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat {
    pub tid: u32,
    pub comm: String,
    /// `utime + stime`, in jiffies.
    pub cpu_jiffies: u64,
    /// CPU the task last ran on.
    pub processor: u32,
}

/// `tid (comm) state ppid ...`: comm may hold spaces and parentheses, so the fields are
/// counted from the LAST `)`. After it, field 3 (state) is index 0, so utime (14) is index
/// 11, stime (15) index 12 and processor (39) index 36.
pub fn parse_task_stat(line: &str) -> Option<TaskStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let tid = line[..open].trim().parse().ok()?;
    let comm = line.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |i: usize| rest.get(i)?.parse::<u64>().ok();
    Some(TaskStat { tid, comm, cpu_jiffies: field(11)? + field(12)?, processor: u32::try_from(field(36)?).ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_per_cpu_busy_and_idle() {
        let text = "cpu  10 0 10 100 5 0 0 0 0 0\n\
                    cpu0 4 1 3 50 2 1 1 1 7 0\n\
                    cpu1 6 0 7 50 3 0 0 0 0 0\n\
                    intr 12345\nctxt 99\n";
        let cpus = parse_proc_stat(text);
        assert_eq!(cpus.len(), 2);
        // user+nice+system+irq+softirq+steal = 4+1+3+1+1+1; guest (7) is inside user already.
        assert_eq!(cpus[0], CpuJiffies { cpu: 0, busy: 11, idle: 52 });
        assert_eq!(cpus[1], CpuJiffies { cpu: 1, busy: 13, idle: 53 });
    }

    #[test]
    fn task_stat_with_tricky_comm() {
        let mut fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fields[0] = "S".into();
        fields[11] = "120".into(); // utime (14)
        fields[12] = "30".into(); // stime (15)
        fields[36] = "3".into(); // processor (39)
        let line = format!("4242 (C2 Compiler) (x)) {}", fields.join(" "));
        let stat = parse_task_stat(&line).unwrap();
        assert_eq!(stat, TaskStat { tid: 4242, comm: "C2 Compiler) (x)".into(), cpu_jiffies: 150, processor: 3 });
        assert_eq!(parse_task_stat("12 (short) S 1 2"), None);
    }
}
