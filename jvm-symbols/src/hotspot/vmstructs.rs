//! The four introspection tables parsed into a model: type sizes and superclasses, field
//! offsets (or addresses, for static fields), and the int and long constants. Nothing here
//! knows a JDK version; readers ask for the fields they need and handle their absence.

use std::collections::HashMap;

use super::error::{bound, HotspotError};
use super::libjvm::TableSymbols;
use super::memory::{MemoryReader, ReadError};
use super::name_pages::NamePages;

/// Entry strides above this are not HotSpot's (real entries are 16 to 48 bytes).
pub const MAX_STRIDE_BYTES: u64 = 256;
/// Entries per table: JDK 11 to 21 have under 1,000 in each (838 fields, 802 types, 417 int
/// and 97 long constants at most).
pub const MAX_ENTRIES: u64 = 8192;
/// Table entries read at once.
const ENTRIES_PER_READ: usize = 64;
/// Longest type, field or constant name (HotSpot's longest is 68 bytes).
pub const MAX_NAME_BYTES: usize = 256;
/// All distinct names of the four tables together (about 42 KB on JDK 11 to 21): what the
/// model of one JVM's tables may hold, whatever the entry count and name lengths.
pub const MAX_TABLE_NAME_BYTES: u64 = 1 << 20;
/// Pages of the target kept while the names are read (1 MiB; real names fill a few dozen).
const MAX_NAME_PAGES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldEntry {
    /// The C++ type of the field as written in vmStructs.cpp (`Method*`, `u2`, `address`).
    pub type_string: String,
    pub is_static: bool,
    /// Offset in the object (non-static fields).
    pub offset: u64,
    /// Address in the target (static fields).
    pub address: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeEntry {
    pub superclass: Option<String>,
    pub size_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmStructs {
    pub fields: HashMap<(String, String), FieldEntry>,
    pub types: HashMap<String, TypeEntry>,
    pub int_constants: HashMap<String, i32>,
    pub long_constants: HashMap<String, i64>,
}

/// One table's base and entry layout, read from the companion symbols.
struct Table {
    name: &'static str,
    first_entry: u64,
    stride: u64,
}

impl Table {
    fn open(
        reader: &impl MemoryReader,
        syms: &TableSymbols,
        name: &'static str,
        stride_symbol: &str,
    ) -> Result<Self, HotspotError> {
        // The table symbol is a pointer variable holding the array's address.
        let first_entry = reader.read_u64(syms.get(name)?)?;
        let stride = reader.read_u64(syms.get(stride_symbol)?)?;
        if stride > MAX_STRIDE_BYTES {
            return Err(bound(stride_symbol, stride, MAX_STRIDE_BYTES));
        }
        // Zero while the VM starts: not filled in yet.
        if first_entry == 0 || stride == 0 {
            return Err(HotspotError::BadTable {
                table: name,
                reason: format!("base {first_entry:#x}, stride {stride}"),
            });
        }
        Ok(Self { name, first_entry, stride })
    }

    /// Calls `f` with each entry's bytes until the entry whose `name_offset` pointer is null.
    fn for_each(
        &self,
        reader: &impl MemoryReader,
        name_offset: usize,
        mut f: impl FnMut(&[u8]) -> Result<(), HotspotError>,
    ) -> Result<(), HotspotError> {
        let stride = self.stride as usize;
        let mut chunk = vec![0u8; stride * ENTRIES_PER_READ];
        let mut i = 0u64;
        // Entries 0 to MAX_ENTRIES - 1, then the end marker.
        while i <= MAX_ENTRIES {
            let at = self.first_entry.checked_add(i * self.stride).ok_or_else(|| {
                bound(format!("{} address", self.name), self.first_entry, u64::MAX - MAX_ENTRIES * self.stride)
            })?;
            // Many entries per read; near the end of the mapping, one at a time.
            let n = if reader.read(at, &mut chunk).is_ok() {
                ENTRIES_PER_READ
            } else {
                reader.read(at, &mut chunk[..stride])?;
                1
            };
            for (k, entry) in chunk[..n * stride].chunks_exact(stride).enumerate() {
                if field_u64(entry, name_offset, self.name)? == 0 {
                    return Ok(());
                }
                if i + k as u64 == MAX_ENTRIES {
                    return Err(bound(format!("{} entries", self.name), MAX_ENTRIES + 1, MAX_ENTRIES));
                }
                f(entry)?;
            }
            i += n as u64;
        }
        Err(bound(format!("{} entries", self.name), MAX_ENTRIES + 1, MAX_ENTRIES))
    }
}

fn field_bytes<'a>(entry: &'a [u8], offset: usize, len: usize, table: &'static str) -> Result<&'a [u8], HotspotError> {
    entry
        .get(offset..offset + len)
        .ok_or_else(|| bound(format!("{table} field end"), (offset + len) as u64, entry.len() as u64))
}

fn field_u64(entry: &[u8], offset: usize, table: &'static str) -> Result<u64, HotspotError> {
    Ok(u64::from_le_bytes(field_bytes(entry, offset, 8, table)?.try_into().expect("8 bytes")))
}

fn field_i32(entry: &[u8], offset: usize, table: &'static str) -> Result<i32, HotspotError> {
    Ok(i32::from_le_bytes(field_bytes(entry, offset, 4, table)?.try_into().expect("4 bytes")))
}

fn read_offset(reader: &impl MemoryReader, syms: &TableSymbols, name: &str) -> Result<usize, HotspotError> {
    let value = reader.read_u64(syms.get(name)?)?;
    if value >= MAX_STRIDE_BYTES {
        return Err(bound(name, value, MAX_STRIDE_BYTES - 1));
    }
    Ok(value as usize)
}

/// Reads the C strings the tables point at. The same literal (`"Method"`, `"address"`)
/// is shared by many entries, so each pointer is read once, and the pages they lie in are
/// read whole, each once ([`NamePages`]). Each name is bounded, and so are all of them
/// together ([`MAX_TABLE_NAME_BYTES`]).
struct Names {
    by_ptr: HashMap<u64, String>,
    total_bytes: u64,
    pages: NamePages,
}

impl Default for Names {
    fn default() -> Self {
        Self { by_ptr: HashMap::new(), total_bytes: 0, pages: NamePages::new(MAX_NAME_PAGES) }
    }
}

impl Names {
    fn read(&mut self, reader: &impl MemoryReader, ptr: u64) -> Result<String, HotspotError> {
        if let Some(name) = self.by_ptr.get(&ptr) {
            return Ok(name.clone());
        }
        let bytes = match self.pages.read_c_string(reader, ptr, MAX_NAME_BYTES) {
            Ok(bytes) => bytes,
            // `read_c_string` reports a string with no NUL within the limit as the whole
            // limit at its start (an unreadable chunk has another address or length).
            Err(e) if e == (ReadError { addr: ptr, len: MAX_NAME_BYTES }) => {
                return Err(bound(
                    format!("name length at {ptr:#x}"),
                    MAX_NAME_BYTES as u64 + 1,
                    MAX_NAME_BYTES as u64,
                ));
            }
            Err(e) => return Err(e.into()),
        };
        self.total_bytes += bytes.len() as u64;
        if self.total_bytes > MAX_TABLE_NAME_BYTES {
            return Err(bound("bytes of all names", self.total_bytes, MAX_TABLE_NAME_BYTES));
        }
        let name = String::from_utf8_lossy(&bytes).into_owned();
        self.by_ptr.insert(ptr, name.clone());
        Ok(name)
    }
}

impl VmStructs {
    /// Reads all four tables from the target.
    pub fn read(reader: &impl MemoryReader, syms: &TableSymbols) -> Result<Self, HotspotError> {
        let mut vm = Self::default();
        let mut names = Names::default();
        vm.read_types(reader, syms, &mut names)?;
        vm.read_structs(reader, syms, &mut names)?;
        vm.read_int_constants(reader, syms, &mut names)?;
        vm.read_long_constants(reader, syms, &mut names)?;
        Ok(vm)
    }

    fn read_types(
        &mut self,
        reader: &impl MemoryReader,
        syms: &TableSymbols,
        names: &mut Names,
    ) -> Result<(), HotspotError> {
        let table = Table::open(reader, syms, "gHotSpotVMTypes", "gHotSpotVMTypeEntryArrayStride")?;
        let name_off = read_offset(reader, syms, "gHotSpotVMTypeEntryTypeNameOffset")?;
        let super_off = read_offset(reader, syms, "gHotSpotVMTypeEntrySuperclassNameOffset")?;
        let size_off = read_offset(reader, syms, "gHotSpotVMTypeEntrySizeOffset")?;
        table.for_each(reader, name_off, |e| {
            let name = names.read(reader, field_u64(e, name_off, table.name)?)?;
            let super_ptr = field_u64(e, super_off, table.name)?;
            let superclass = if super_ptr == 0 { None } else { Some(names.read(reader, super_ptr)?) };
            let size_bytes = field_u64(e, size_off, table.name)?;
            self.types.insert(name, TypeEntry { superclass, size_bytes });
            Ok(())
        })
    }

    fn read_structs(
        &mut self,
        reader: &impl MemoryReader,
        syms: &TableSymbols,
        names: &mut Names,
    ) -> Result<(), HotspotError> {
        let table = Table::open(reader, syms, "gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride")?;
        let type_off = read_offset(reader, syms, "gHotSpotVMStructEntryTypeNameOffset")?;
        let field_off = read_offset(reader, syms, "gHotSpotVMStructEntryFieldNameOffset")?;
        let type_string_off = read_offset(reader, syms, "gHotSpotVMStructEntryTypeStringOffset")?;
        let static_off = read_offset(reader, syms, "gHotSpotVMStructEntryIsStaticOffset")?;
        let offset_off = read_offset(reader, syms, "gHotSpotVMStructEntryOffsetOffset")?;
        let address_off = read_offset(reader, syms, "gHotSpotVMStructEntryAddressOffset")?;
        table.for_each(reader, type_off, |e| {
            let type_name = names.read(reader, field_u64(e, type_off, table.name)?)?;
            let field_name = names.read(reader, field_u64(e, field_off, table.name)?)?;
            let type_string_ptr = field_u64(e, type_string_off, table.name)?;
            let type_string = if type_string_ptr == 0 { String::new() } else { names.read(reader, type_string_ptr)? };
            let entry = FieldEntry {
                type_string,
                is_static: field_i32(e, static_off, table.name)? != 0,
                offset: field_u64(e, offset_off, table.name)?,
                address: field_u64(e, address_off, table.name)?,
            };
            self.fields.insert((type_name, field_name), entry);
            Ok(())
        })
    }

    fn read_int_constants(
        &mut self,
        reader: &impl MemoryReader,
        syms: &TableSymbols,
        names: &mut Names,
    ) -> Result<(), HotspotError> {
        let table = Table::open(reader, syms, "gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntryArrayStride")?;
        let name_off = read_offset(reader, syms, "gHotSpotVMIntConstantEntryNameOffset")?;
        let value_off = read_offset(reader, syms, "gHotSpotVMIntConstantEntryValueOffset")?;
        table.for_each(reader, name_off, |e| {
            let name = names.read(reader, field_u64(e, name_off, table.name)?)?;
            self.int_constants.insert(name, field_i32(e, value_off, table.name)?);
            Ok(())
        })
    }

    fn read_long_constants(
        &mut self,
        reader: &impl MemoryReader,
        syms: &TableSymbols,
        names: &mut Names,
    ) -> Result<(), HotspotError> {
        let table = Table::open(reader, syms, "gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntryArrayStride")?;
        let name_off = read_offset(reader, syms, "gHotSpotVMLongConstantEntryNameOffset")?;
        let value_off = read_offset(reader, syms, "gHotSpotVMLongConstantEntryValueOffset")?;
        table.for_each(reader, name_off, |e| {
            let name = names.read(reader, field_u64(e, name_off, table.name)?)?;
            self.long_constants.insert(name, field_u64(e, value_off, table.name)? as i64);
            Ok(())
        })
    }

    /// A field of `type_name` or of one of its superclasses (`nmethod::_method` is declared
    /// on `CompiledMethod` in JDK 9 to 22, on `nmethod` itself later).
    pub fn field(&self, type_name: &str, field_name: &str) -> Option<&FieldEntry> {
        let mut ty = type_name.to_owned();
        // Class hierarchies are shallow; the bound only guards against a cyclic table.
        for _ in 0..32 {
            if let Some(f) = self.fields.get(&(ty.clone(), field_name.to_owned())) {
                return Some(f);
            }
            ty = self.types.get(&ty)?.superclass.clone()?;
        }
        None
    }

    pub fn type_size(&self, type_name: &str) -> Option<u64> {
        self.types.get(type_name).map(|t| t.size_bytes)
    }

    pub fn int_constant(&self, name: &str) -> Option<i32> {
        self.int_constants.get(name).copied()
    }

    pub fn long_constant(&self, name: &str) -> Option<i64> {
        self.long_constants.get(name).copied()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hotspot::memory::SegmentsMemory;

    /// Builds tables in memory with the JDK's entry layouts (which the companion symbols
    /// describe, so any layout works): for tests of every reader above this one.
    pub(crate) struct TableBuilder {
        pub mem: SegmentsMemory,
        pub syms: TableSymbols,
        next_string: u64,
    }

    /// Far above the tables, so that tables of thousands of long names fit.
    const STRINGS: u64 = 0x1000_0000;
    const SYMBOLS: u64 = 0x20_0000;

    impl TableBuilder {
        pub fn new() -> Self {
            Self { mem: SegmentsMemory::new(), syms: TableSymbols::default(), next_string: STRINGS }
        }

        fn string(&mut self, s: &str) -> u64 {
            let at = self.next_string;
            let mut b = s.as_bytes().to_vec();
            b.push(0);
            self.mem.insert(at, &b);
            self.next_string += b.len() as u64 + 7;
            at
        }

        fn symbol(&mut self, name: &str, value: u64) {
            let at = SYMBOLS + self.syms.addrs.len() as u64 * 8;
            self.mem.insert(at, &value.to_le_bytes());
            self.syms.addrs.insert(name.to_owned(), at);
        }

        /// Lays out the tables at `base` (+0 types, +0x10000 structs, +0x20000 ints,
        /// +0x30000 longs).
        pub fn build(
            mut self,
            base: u64,
            types: &[(&str, Option<&str>, u64)],
            fields: &[(&str, &str, &str, bool, u64)],
            ints: &[(&str, i32)],
            longs: &[(&str, i64)],
        ) -> (SegmentsMemory, TableSymbols) {
            // Types: name@0 super@8 size@16, stride 24 (a layout unlike the JDK's, on purpose).
            let mut t = Vec::new();
            for (name, sup, size) in types {
                let n = self.string(name);
                let s = sup.map_or(0, |s| self.string(s));
                t.extend_from_slice(&n.to_le_bytes());
                t.extend_from_slice(&s.to_le_bytes());
                t.extend_from_slice(&size.to_le_bytes());
            }
            t.extend_from_slice(&[0; 24]);
            self.mem.insert(base, &t);
            self.symbol("gHotSpotVMTypes", base);
            self.symbol("gHotSpotVMTypeEntryArrayStride", 24);
            self.symbol("gHotSpotVMTypeEntryTypeNameOffset", 0);
            self.symbol("gHotSpotVMTypeEntrySuperclassNameOffset", 8);
            self.symbol("gHotSpotVMTypeEntrySizeOffset", 16);
            // Structs: type@0 field@8 typestring@16 static@24(i32) offset@32 address@40.
            let mut s = Vec::new();
            for (ty, field, ts, is_static, value) in fields {
                let (a, b, c) = (self.string(ty), self.string(field), self.string(ts));
                s.extend_from_slice(&a.to_le_bytes());
                s.extend_from_slice(&b.to_le_bytes());
                s.extend_from_slice(&c.to_le_bytes());
                s.extend_from_slice(&(*is_static as u64).to_le_bytes());
                let (off, addr) = if *is_static { (0, *value) } else { (*value, 0) };
                s.extend_from_slice(&off.to_le_bytes());
                s.extend_from_slice(&addr.to_le_bytes());
            }
            s.extend_from_slice(&[0; 48]);
            self.mem.insert(base + 0x10000, &s);
            self.symbol("gHotSpotVMStructs", base + 0x10000);
            self.symbol("gHotSpotVMStructEntryArrayStride", 48);
            for (n, v) in [
                ("TypeNameOffset", 0),
                ("FieldNameOffset", 8),
                ("TypeStringOffset", 16),
                ("IsStaticOffset", 24),
                ("OffsetOffset", 32),
                ("AddressOffset", 40),
            ] {
                self.symbol(&format!("gHotSpotVMStructEntry{n}"), v);
            }
            for (table, at, entries) in [
                ("Int", base + 0x20000, ints.iter().map(|(n, v)| (*n, *v as i64)).collect::<Vec<_>>()),
                ("Long", base + 0x30000, longs.to_vec()),
            ] {
                let mut c = Vec::new();
                for (name, value) in entries {
                    c.extend_from_slice(&self.string(name).to_le_bytes());
                    c.extend_from_slice(&value.to_le_bytes());
                }
                c.extend_from_slice(&[0; 16]);
                self.mem.insert(at, &c);
                self.symbol(&format!("gHotSpotVM{table}Constants"), at);
                self.symbol(&format!("gHotSpotVM{table}ConstantEntryArrayStride"), 16);
                self.symbol(&format!("gHotSpotVM{table}ConstantEntryNameOffset"), 0);
                self.symbol(&format!("gHotSpotVM{table}ConstantEntryValueOffset"), 8);
            }
            (self.mem, self.syms)
        }
    }

    #[test]
    fn parses_hand_built_tables_and_walks_superclasses() {
        let (mem, syms) = TableBuilder::new().build(
            0x40_0000,
            &[
                ("CodeBlob", None, 100),
                ("CompiledMethod", Some("CodeBlob"), 200),
                ("nmethod", Some("CompiledMethod"), 300),
            ],
            &[
                ("CompiledMethod", "_method", "Method*", false, 0x48),
                ("nmethod", "_compile_id", "int", false, 0x90),
                ("CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", true, 0x7f00_1234),
            ],
            &[("frame::interpreter_frame_method_offset", -3)],
            &[("markWord::hash_mask", 0x7fff_ffff)],
        );
        let vm = VmStructs::read(&mem, &syms).unwrap();
        assert_eq!(vm.type_size("nmethod"), Some(300));
        assert_eq!(vm.field("nmethod", "_method").unwrap().offset, 0x48, "inherited field");
        assert_eq!(vm.field("nmethod", "_compile_id").unwrap().type_string, "int");
        assert_eq!(vm.field("CodeBlob", "_compile_id"), None, "fields are not inherited downward");
        let heaps = vm.field("CodeCache", "_heaps").unwrap();
        assert!(heaps.is_static);
        assert_eq!(heaps.address, 0x7f00_1234);
        assert_eq!(vm.int_constant("frame::interpreter_frame_method_offset"), Some(-3));
        assert_eq!(vm.long_constant("markWord::hash_mask"), Some(0x7fff_ffff));
        assert_eq!(vm.int_constant("nope"), None);
    }

    #[test]
    fn a_missing_symbol_or_an_absurd_stride_is_an_error() {
        let (mem, mut syms) = TableBuilder::new().build(0x40_0000, &[], &[], &[], &[]);
        let mut bad = mem.clone();
        bad.insert(syms.get("gHotSpotVMTypeEntryArrayStride").unwrap(), &4096u64.to_le_bytes());
        assert!(matches!(VmStructs::read(&bad, &syms), Err(HotspotError::Bound { .. })));
        syms.addrs.remove("gHotSpotVMLongConstants");
        assert!(matches!(VmStructs::read(&mem, &syms), Err(HotspotError::MissingSymbol { .. })));
    }

    #[test]
    fn a_table_without_end_marker_in_readable_memory_is_a_read_error() {
        let (mut mem, syms) = TableBuilder::new().build(0x40_0000, &[("int", None, 4)], &[], &[], &[]);
        // Overwrite the end marker: the next entry is unrecorded memory.
        mem.insert(0x40_0000 + 24, &[1; 8]);
        assert!(VmStructs::read(&mem, &syms).is_err());
    }
}
