//! Finding HotSpot's introspection tables in a process: libjvm.so in `/proc/<pid>/maps`,
//! its ELF dynamic symbols read from the mapped file, and the load bias that turns their
//! values into addresses in the target.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use object::read::elf::{ElfFile64, ProgramHeader, SectionHeader};
use object::{Endianness, Object, ObjectSymbol, ReadCache, ReadRef};

use super::error::HotspotError;
use crate::maps::{parse_maps, Mapping, MAX_MAPS_BYTES};

/// The exported symbols that describe the four tables: each table's base pointer, the
/// stride of its entries and the offset of every entry field.
pub const TABLE_SYMBOLS: &[&str] = &[
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySuperclassNameOffset",
    "gHotSpotVMTypeEntryIsOopTypeOffset",
    "gHotSpotVMTypeEntryIsIntegerTypeOffset",
    "gHotSpotVMTypeEntryIsUnsignedOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
    "gHotSpotVMLongConstants",
    "gHotSpotVMLongConstantEntryArrayStride",
    "gHotSpotVMLongConstantEntryNameOffset",
    "gHotSpotVMLongConstantEntryValueOffset",
];

/// Statics that name HotSpot's stubs (`stub_names`) and hold its loop-poll handler blobs
/// (`poll_blobs`), looked up in libjvm's full symbol table (`.symtab`; OpenJDK builds keep
/// it, Debian's and Temurin's from JDK 11 to 25 do): none of them is exported, nor in the
/// VMStructs tables. A libjvm without them names stubs by their blob only, and its samples
/// at a loop poll's entry into the handler blob stay cut.
pub const STUB_SYMBOLS: &[&str] = &[
    super::stub_names::STUB_CODE_DESC_LIST,
    super::stub_names::VTABLE_STUBS_TABLE,
    super::poll_blobs::LOOP_POLL_HANDLER_BLOBS[0],
    super::poll_blobs::LOOP_POLL_HANDLER_BLOBS[1],
];

/// A stripped libjvm.so is about 20 MB; the target controls this file, so bound it.
const MAX_LIBJVM_BYTES: u64 = 256 << 20;
/// libjvm.so's dynamic symbol and string tables are about 12 and 8 KB (JDK 17): whatever
/// the file says, no more than this is read of either.
const MAX_DYNAMIC_TABLE_BYTES: u64 = 4 << 20;
/// libjvm.so's full symbol and string tables are about 1.5 and 3 MB (JDK 11 to 25): a larger
/// one is not read (its stubs are then named by their blob).
const MAX_SYMTAB_BYTES: u64 = 32 << 20;

/// Runtime addresses (in the target) of the [`TABLE_SYMBOLS`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableSymbols {
    pub addrs: BTreeMap<String, u64>,
}

impl TableSymbols {
    pub fn get(&self, name: &str) -> Result<u64, HotspotError> {
        self.addrs.get(name).copied().ok_or_else(|| HotspotError::MissingSymbol { symbol: name.to_owned() })
    }
}

/// libjvm.so as mapped in a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibjvmMapping {
    /// Path as the target sees it (inside its mount namespace).
    pub path: String,
    /// Lowest mapped address of the library (its first `PT_LOAD`, file offset 0).
    pub start: u64,
    /// End of that lowest mapping (for its `/proc/<pid>/map_files/` entry).
    pub end: u64,
}

fn is_libjvm(path: &str) -> bool {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    path.rsplit('/').next() == Some("libjvm.so")
}

/// The lowest mapping of libjvm.so in a parsed maps file.
pub fn find_libjvm(maps: &[Mapping]) -> Option<LibjvmMapping> {
    maps.iter().filter(|m| m.path.as_deref().is_some_and(is_libjvm)).min_by_key(|m| m.start).map(|m| LibjvmMapping {
        path: m.path.clone().unwrap_or_default(),
        start: m.start,
        end: m.end,
    })
}

/// Resolves the table symbols of a libjvm.so image mapped with its lowest `PT_LOAD` at
/// `mapped_start`.
pub fn table_symbols_from_elf<'data, R: ReadRef<'data>>(
    data: R,
    mapped_start: u64,
    path: &Path,
) -> Result<TableSymbols, HotspotError> {
    let elf_err = |reason: String| HotspotError::Elf { path: path.to_owned(), reason };
    let elf = ElfFile64::<Endianness, R>::parse(data).map_err(|e| elf_err(e.to_string()))?;
    let endian = elf.endian();
    let first_load_vaddr = elf
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| ph.p_vaddr(endian))
        .min()
        .ok_or_else(|| elf_err("no PT_LOAD segment".into()))?;
    let sections = elf.elf_section_table();
    for dynsym in sections.iter().filter(|s| s.sh_type(endian) == object::elf::SHT_DYNSYM) {
        let strings = sections.section(object::SectionIndex(dynsym.sh_link(endian) as usize)).ok();
        for size_bytes in [Some(dynsym.sh_size(endian)), strings.map(|s| s.sh_size(endian))].into_iter().flatten() {
            if size_bytes > MAX_DYNAMIC_TABLE_BYTES {
                return Err(HotspotError::TooLarge {
                    path: path.to_owned(),
                    size_bytes,
                    limit_bytes: MAX_DYNAMIC_TABLE_BYTES,
                });
            }
        }
    }
    // The loader maps the first segment at a page boundary: the bias is what it added.
    let bias = mapped_start.wrapping_sub(first_load_vaddr & !0xfff);
    let mut addrs = BTreeMap::new();
    for sym in elf.dynamic_symbols() {
        let Ok(name) = sym.name() else { continue };
        if TABLE_SYMBOLS.contains(&name) && sym.address() != 0 {
            addrs.insert(name.to_owned(), sym.address().wrapping_add(bias));
        }
    }
    for (name, value) in stub_symbols(&elf, data) {
        addrs.insert(name.to_owned(), value.wrapping_add(bias));
    }
    for name in TABLE_SYMBOLS {
        if !addrs.contains_key(*name) {
            return Err(HotspotError::MissingSymbol { symbol: (*name).to_owned() });
        }
    }
    Ok(TableSymbols { addrs })
}

/// The [`STUB_SYMBOLS`] in the full symbol table (file values), if it is there and not over
/// `MAX_SYMTAB_BYTES`. Each table is read in one piece and scanned as bytes: the names are
/// found in the string table first, then the symbols that point at them (asking `object`
/// for every symbol's name would read the string table once per symbol, some 60,000 reads).
fn stub_symbols<'data, R: ReadRef<'data>>(elf: &ElfFile64<'data, Endianness, R>, data: R) -> Vec<(&'static str, u64)> {
    let endian = elf.endian();
    let sections = elf.elf_section_table();
    let mut found = Vec::new();
    for symtab in sections.iter().filter(|s| s.sh_type(endian) == object::elf::SHT_SYMTAB) {
        let Ok(strtab) = sections.section(object::SectionIndex(symtab.sh_link(endian) as usize)) else {
            continue;
        };
        if symtab.sh_size(endian).saturating_add(strtab.sh_size(endian)) > MAX_SYMTAB_BYTES {
            continue;
        }
        let (Ok(symbols), Ok(strings)) = (symtab.data(endian, data), strtab.data(endian, data)) else {
            continue;
        };
        let Ok(symbols) = object::pod::slice_from_all_bytes::<object::elf::Sym64<Endianness>>(symbols) else {
            continue;
        };
        for &name in STUB_SYMBOLS {
            // A name starts the string table or follows a NUL, and ends at one.
            let mut wanted = vec![0];
            wanted.extend_from_slice(name.as_bytes());
            wanted.push(0);
            let at = match strings.starts_with(&wanted[1..]) {
                true => Some(0),
                false => memchr::memmem::find(strings, &wanted).map(|i| i + 1),
            };
            let Some(at) = at else {
                continue;
            };
            let value = symbols.iter().find(|s| s.st_name.get(endian) as usize == at).map(|s| s.st_value.get(endian));
            if let Some(value) = value.filter(|&v| v != 0) {
                found.push((name, value));
            }
        }
    }
    found
}

/// Opens libjvm.so for lazy reads: only the ELF headers and the symbol and string tables
/// are read, not the whole (about 20 MB) file.
fn open_bounded(path: &Path) -> Result<ReadCache<File>, HotspotError> {
    open_libjvm(path).map(ReadCache::new)
}

/// Opens the libjvm.so at `path` (a `map_files/` entry from [`locate_libjvm`]), refusing one
/// over `MAX_LIBJVM_BYTES`. Its reads are the caller's to bound (a target's file may sit on a
/// filesystem that never answers, or on a cold disk): [`table_symbols_from_elf`] reads it lazily.
pub fn open_libjvm(path: &Path) -> Result<File, HotspotError> {
    let io = |source| HotspotError::Io { path: path.to_owned(), source };
    let file = File::open(path).map_err(io)?;
    let size_bytes = file.metadata().map_err(io)?.len();
    if size_bytes > MAX_LIBJVM_BYTES {
        return Err(HotspotError::TooLarge { path: path.to_owned(), size_bytes, limit_bytes: MAX_LIBJVM_BYTES });
    }
    Ok(file)
}

/// Finds libjvm.so in process `pid` (under `proc_root`, normally `/proc`): its lowest mapping
/// and the path that reaches its file. The file is read only through `map_files/`: the very file
/// that is mapped (even if replaced or deleted since), reached without resolving any path inside
/// the target's file system, where a symlink could point anywhere. Opening it needs
/// CAP_CHECKPOINT_RESTORE (or root), as native symbolization does.
pub fn locate_libjvm(proc_root: &Path, pid: u32) -> Result<(LibjvmMapping, PathBuf), HotspotError> {
    let pid_dir = proc_root.join(pid.to_string());
    let maps_path = pid_dir.join("maps");
    let maps_file = File::open(&maps_path).map_err(|source| HotspotError::Io { path: maps_path.clone(), source })?;
    let maps = parse_maps(BufReader::new(maps_file.take(MAX_MAPS_BYTES)));
    let lib = find_libjvm(&maps).ok_or(HotspotError::NoLibjvm { pid })?;
    let path: PathBuf = pid_dir.join("map_files").join(format!("{:x}-{:x}", lib.start, lib.end));
    Ok((lib, path))
}

/// Finds libjvm.so in process `pid` ([`locate_libjvm`]) and resolves its table symbols, its
/// reads unbounded in time (a caller that must not wait on a target's file reads it through
/// [`open_libjvm`] and [`table_symbols_from_elf`] itself).
pub fn locate_tables(proc_root: &Path, pid: u32) -> Result<(LibjvmMapping, TableSymbols), HotspotError> {
    let (lib, path) = locate_libjvm(proc_root, pid)?;
    let data = open_bounded(&path)?;
    let symbols = table_symbols_from_elf(&data, lib.start, &path)?;
    Ok((lib, symbols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_lowest_libjvm_mapping() {
        let maps = "\
7f1b24600000-7f1b24851000 r--p 00000000 fe:00 315160 /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so
7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so
7f1b20000000-7f1b20001000 r--p 00000000 fe:00 315161 /opt/libjvm.so.bak
7f1b10000000-7f1b10001000 r--p 00000000 fe:00 315162 /usr/lib/libjava.so
";
        let lib = find_libjvm(&parse_maps(maps.as_bytes())).unwrap();
        assert_eq!(lib.start, 0x7f1b24600000);
        assert_eq!(lib.end, 0x7f1b24851000);
        assert!(lib.path.ends_with("server/libjvm.so"));
        assert!(is_libjvm("/x/libjvm.so (deleted)"));
        assert!(!is_libjvm("/x/notlibjvm.so"));
        assert_eq!(find_libjvm(&parse_maps("".as_bytes())), None);
    }

    #[test]
    fn a_non_elf_file_is_an_error_not_a_panic() {
        let err = table_symbols_from_elf(&b"\x7fELF garbage"[..], 0x1000, Path::new("x")).unwrap_err();
        assert!(matches!(err, HotspotError::Elf { .. }), "{err}");
    }

    /// The installed JDK's libjvm.so exports every table symbol, at distinct addresses
    /// shifted by exactly the bias.
    #[test]
    fn resolves_the_installed_jdk_table_symbols() {
        let path = Path::new("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
        let data = open_bounded(path).expect("the JDK 17 the project needs is installed");
        let at0 = table_symbols_from_elf(&data, 0, path).unwrap();
        let at_bias = table_symbols_from_elf(&data, 0x7f00_0000_0000, path).unwrap();
        assert_eq!(at0.addrs.len(), TABLE_SYMBOLS.len() + STUB_SYMBOLS.len(), "{:?}", at0.addrs.keys());
        for (name, addr) in &at0.addrs {
            assert_eq!(at_bias.get(name).unwrap(), addr + 0x7f00_0000_0000, "{name}");
        }
    }
}
