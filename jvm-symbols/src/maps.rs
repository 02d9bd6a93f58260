//! `/proc/<pid>/maps`: which libraries a process maps (is libjvm.so there?) and where its
//! anonymous executable memory is (HotSpot's code cache).

use std::io::BufRead;

/// What a reader takes of `/proc/<pid>/maps` at most: the kernel writes it, but its length is
/// the process's doing (a mapping per page if it likes).
pub const MAX_MAPS_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    /// The file behind the mapping; `None` for anonymous memory.
    pub path: Option<String>,
}

impl Mapping {
    /// Anonymous executable memory: where JIT compilers put their code.
    pub fn is_anonymous_code(&self) -> bool {
        self.executable && self.path.is_none()
    }

    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

/// Parses a maps file; unparsable lines are skipped (the kernel writes this file, so a
/// bad line can only mean a format this parser does not know yet). Paths are the process's
/// and may be any bytes: they are read lossily, so one that is not UTF-8 hides nothing after it.
pub fn parse_maps(reader: impl BufRead) -> Vec<Mapping> {
    reader
        .split(b'\n')
        .map_while(Result::ok)
        .filter_map(|line| parse_maps_line(&String::from_utf8_lossy(&line)))
        .collect()
}

fn parse_maps_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().map(str::trim_start).filter(|p| !p.is_empty());
    // `[heap]`, `[stack]`, `[anon:name]` are anonymous too; `[vdso]` is code but a file-like
    // image that blazesym resolves, so only bracketed names other than vdso/vsyscall count.
    let path = match path {
        Some(p) if p.starts_with('[') && p != "[vdso]" && p != "[vsyscall]" => None,
        other => other.map(str::to_owned),
    };
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
7f1b09400000-7f1b09670000 rwxp 00000000 00:00 0 
7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160                     /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so
7f1b255a4000-7f1b255b0000 r--p 00000000 00:00 0                          [anon:java heap]
7ffd5a1f0000-7ffd5a1f2000 r-xp 00000000 00:00 0                          [vdso]
garbage
";

    #[test]
    fn a_path_that_is_not_utf8_hides_no_later_mapping() {
        // Found by the proc_maps fuzz target: `lines()` stopped at the first invalid byte, so
        // a JVM that mapped such a file before libjvm.so was not recognised as a JVM.
        let maps = b"7f00000000-7f00001000 r-xp 00000000 fe:00 1 /opt/\xff\xfe/libweird.so\n\
7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 /usr/lib/jvm/lib/server/libjvm.so\n";
        let maps = parse_maps(&maps[..]);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].path.as_deref(), Some("/opt/\u{fffd}\u{fffd}/libweird.so"));
        assert_eq!(maps[1].path.as_deref(), Some("/usr/lib/jvm/lib/server/libjvm.so"));
    }

    #[test]
    fn parses_code_cache_and_libraries() {
        let maps = parse_maps(MAPS.as_bytes());
        assert_eq!(maps.len(), 4);
        assert!(maps[0].is_anonymous_code());
        assert!(maps[0].contains(0x7f1b09400000) && !maps[0].contains(0x7f1b09670000));
        assert_eq!(maps[1].path.as_deref(), Some("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"));
        assert!(!maps[1].is_anonymous_code());
        assert_eq!(maps[2].path, None);
        assert!(!maps[2].executable);
        assert!(!maps[3].is_anonymous_code());
    }
}
