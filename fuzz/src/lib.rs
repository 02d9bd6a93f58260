//! A fake machine for the energy-source targets, described by a few lines of text so the seed
//! corpora stay readable and the fuzzer mutates contents, not structure:
//!
//! ```text
//! cpu <n> <physical_package_id contents>          devices/system/cpu/cpu<n>/topology/ (n < 256)
//! zone <dir> <name> <max_energy_range_uj> <energy_uj per read>...   class/powercap/<dir>/
//! cpuinfo <line>                                  a line of proc/cpuinfo
//! msr <cpu> <register, hex> <value per read, hex>...   8 bytes at that offset of dev/cpu/<cpu>/msr
//! flags [dram] [psys]
//! ```
//!
//! Tokens are split on single spaces and may hold any other byte; a directory token that is not
//! one file name (`/`, `.`, `..`, over 255 bytes) makes the line be ignored.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use joular_user::energy::{open_source, EnergyOptions, SocketEnergy, SourceKind, Topology};

/// Reads taken from an opened source.
pub const MAX_READS: usize = 4;
/// MSR offsets above this would only make a huge sparse file.
const MAX_REGISTER: u64 = 0xFFFF_FFFF;

#[derive(Debug, Default)]
pub struct FakeMachine {
    cpus: Vec<(u8, Vec<u8>)>,
    zones: Vec<(Vec<u8>, Vec<u8>, Vec<u8>, Vec<Vec<u8>>)>,
    cpuinfo: Vec<u8>,
    msrs: BTreeMap<(u8, u64), Vec<u64>>,
    pub dram: bool,
    pub psys: bool,
}

/// A single file name the scratch tree can hold (what a sysfs directory could be called).
fn safe_name(token: &[u8]) -> bool {
    let fits = !token.is_empty() && token.len() <= 255;
    fits && token != b"." && token != b".." && !token.contains(&b'/') && !token.contains(&0)
}

fn parse_num<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

fn parse_hex(token: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(token).ok()?;
    u64::from_str_radix(text.trim_start_matches("0x"), 16).ok()
}

impl FakeMachine {
    pub fn parse(data: &[u8]) -> Self {
        let mut m = FakeMachine::default();
        for line in data.split(|&b| b == b'\n') {
            let mut tokens = line.split(|&b| b == b' ');
            match tokens.next().unwrap_or_default() {
                b"cpu" => {
                    let (Some(n), Some(id)) = (tokens.next().and_then(parse_num::<u8>), tokens.next()) else {
                        continue;
                    };
                    m.cpus.push((n, id.to_vec()));
                }
                b"zone" => {
                    let (Some(dir), Some(name), Some(range)) = (tokens.next(), tokens.next(), tokens.next()) else {
                        continue;
                    };
                    if safe_name(dir) {
                        m.zones.push((
                            dir.to_vec(),
                            name.to_vec(),
                            range.to_vec(),
                            tokens.map(<[u8]>::to_vec).collect(),
                        ));
                    }
                }
                b"cpuinfo" => {
                    m.cpuinfo.extend_from_slice(line.get(8..).unwrap_or_default());
                    m.cpuinfo.push(b'\n');
                }
                b"msr" => {
                    let (Some(cpu), Some(register)) =
                        (tokens.next().and_then(parse_num::<u8>), tokens.next().and_then(parse_hex))
                    else {
                        continue;
                    };
                    if register <= MAX_REGISTER {
                        m.msrs.insert((cpu, register), tokens.filter_map(parse_hex).collect());
                    }
                }
                b"flags" => {
                    for flag in tokens {
                        m.dram |= flag == b"dram";
                        m.psys |= flag == b"psys";
                    }
                }
                _ => {}
            }
        }
        m
    }

    /// Writes the tree under `root` as it is before the first read.
    pub fn build(&self, root: &Path) -> std::io::Result<()> {
        let sys = root.join("sys");
        std::fs::create_dir_all(sys.join("class/powercap"))?;
        std::fs::create_dir_all(root.join("proc"))?;
        for (n, id) in &self.cpus {
            let topo = sys.join(format!("devices/system/cpu/cpu{n}/topology"));
            std::fs::create_dir_all(&topo)?;
            std::fs::write(topo.join("physical_package_id"), id)?;
        }
        for (dir, name, range, _) in &self.zones {
            let zone = self.zone_dir(root, dir);
            std::fs::create_dir_all(&zone)?;
            std::fs::write(zone.join("name"), name)?;
            std::fs::write(zone.join("max_energy_range_uj"), range)?;
        }
        std::fs::write(root.join("proc/cpuinfo"), &self.cpuinfo)?;
        self.advance(root, 0)
    }

    /// Puts the counters at their `read`-th value; a zone without one loses its `energy_uj`
    /// (the read fails, as a sysfs read can).
    pub fn advance(&self, root: &Path, read: usize) -> std::io::Result<()> {
        for (dir, _, _, values) in &self.zones {
            let file = self.zone_dir(root, dir).join("energy_uj");
            match values.get(read) {
                Some(v) => std::fs::write(file, v)?,
                None => {
                    let _ = std::fs::remove_file(file);
                }
            }
        }
        for (&(cpu, register), values) in &self.msrs {
            let dir = root.join(format!("dev/cpu/{cpu}"));
            std::fs::create_dir_all(&dir)?;
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("msr"))?;
            if let Some(v) = values.get(read).or(values.last()) {
                file.write_all_at(&v.to_le_bytes(), register)?;
            }
        }
        Ok(())
    }

    fn zone_dir(&self, root: &Path, dir: &[u8]) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        root.join("sys/class/powercap").join(std::ffi::OsStr::from_bytes(dir))
    }

    /// Builds the machine in a scratch directory, opens `kind` on it and reads it up to
    /// [`MAX_READS`] times. Every reading that succeeds is checked: one entry per socket of the
    /// topology, ascending, and energy that is finite and never negative.
    pub fn exercise(&self, kind: SourceKind) {
        let tmp = scratch_dir();
        let root = tmp.path();
        self.build(root).expect("build the fake tree");
        let opts = EnergyOptions {
            sysfs_root: root.join("sys"),
            proc_root: root.join("proc"),
            dev_root: root.join("dev"),
            source: Some(kind),
            dram: self.dram,
            psys: self.psys,
            ..EnergyOptions::default()
        };
        let Ok(topo) = Topology::read(&opts.sysfs_root, &opts.proc_root) else { return };
        let Ok((mut source, _)) = open_source(&opts, &topo) else { return };
        let sockets: Vec<u32> = topo.sockets().collect();
        for read in 1..=MAX_READS {
            self.advance(root, read).expect("advance the counters");
            let Ok(energy) = source.read(&Default::default()) else { continue };
            check(&energy, &sockets);
        }
    }
}

/// A scratch directory, in memory when /dev/shm is there: targets rewrite files for every input.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    dir.expect("scratch directory")
}

fn check(energy: &[SocketEnergy], sockets: &[u32]) {
    assert!(energy.windows(2).all(|w| w[0].socket < w[1].socket), "sockets not ascending: {energy:?}");
    assert!(energy.iter().all(|e| sockets.contains(&e.socket)), "{energy:?} vs {sockets:?}");
    for e in energy {
        for uj in [Some(e.energy_uj), e.dram_energy_uj, e.psys_energy_uj].into_iter().flatten() {
            assert!(uj.is_finite() && uj >= 0.0, "socket {}: {uj} µJ in {e:?}", e.socket);
        }
        if e.flagged {
            assert_eq!(e.energy_uj, 0.0);
        }
    }
}
