//! Where a process's start time lies in the kernel's `task_struct`, read from the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`), so the sampler can tag each sample with its process's identity
//! (`CONFIG_TASK_OFFSETS`): Rust eBPF has no CO-RE field relocations, and the layout changes
//! with every kernel build.
//!
//! A reader of the two fields only, by hand: aya parses BTF but keeps struct members private
//! (and, patched, parses the kernel's only for objects with CO-RE relocations, which ours has
//! not), and the BTF crates are LGPL (this crate is MIT/Apache) or a whole dump tool. The format
//! is the kernel's (`Documentation/bpf/btf.rst`): a header, a type section (each type a 12-byte
//! record and kind-specific data after it), a string section. Everything is read bounded.
//!
//! This runs at every start, inside the first second of the workload being measured, so it is
//! kept cheap: the file is mapped when the kernel allows it (Linux 6.16+; a read copies its
//! ~6 MB a page per system call), and one pass over the ~130,000 type records keeps only their
//! offsets.

use std::{
    fs::File,
    ops::Deref,
    path::{Path, PathBuf},
};

use memmap2::{Mmap, MmapOptions};

const BTF_MAGIC: u16 = 0xeb9f;
const HEADER_BYTES: usize = 24;
const TYPE_BYTES: usize = 12;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;
/// Anonymous structs and unions nest this deep at most before we give up.
const MAX_NESTING: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum TaskFieldsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Btf {
        path: PathBuf,
        #[source]
        source: BtfError,
    },
}

/// What makes a BTF blob unusable for `TaskFields`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    #[error("not little-endian BTF")]
    NotBtf,
    #[error("truncated BTF {0}")]
    Truncated(&'static str),
    #[error("unknown BTF kind {0}")]
    UnknownKind(u32),
    #[error("no struct task_struct")]
    NoTaskStruct,
    #[error("task_struct has no {0}")]
    MissingField(&'static str),
    #[error("task_struct::{field} is not {expected}")]
    WrongType { field: &'static str, expected: &'static str },
    #[error("task_struct::{0} is not byte-aligned")]
    Unaligned(&'static str),
    #[error("no struct {0}")]
    NoStruct(&'static str),
    #[error("{owner} has no byte-aligned {field} within 64 KiB")]
    NoMember { owner: &'static str, field: &'static str },
}

/// Byte offsets of `task_struct::group_leader` and of the start time /proc shows
/// (`start_boottime`, `real_start_time` before Linux 5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskFields {
    pub group_leader: u32,
    pub start_boottime: u32,
}

/// The file's bytes: mapped (the kernel's own copy, fixed for the life of the kernel: no
/// truncation can fault the map), or read on kernels that cannot map it.
enum Blob {
    Mapped(Mmap),
    Read(Vec<u8>),
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Mapped(m) => m,
            Blob::Read(v) => v,
        }
    }
}

impl TaskFields {
    /// The value of `CONFIG_TASK_OFFSETS`.
    pub fn config_value(self) -> u64 {
        u64::from(self.group_leader) << 32 | u64::from(self.start_boottime)
    }

    /// From `<sys_root>/kernel/btf/vmlinux`.
    pub fn from_sys(sys_root: &Path) -> Result<Self, TaskFieldsError> {
        with_vmlinux(sys_root, Self::from_btf)
    }

    pub fn from_btf(bytes: &[u8]) -> Result<Self, BtfError> {
        let btf = Btf::parse(bytes)?;
        let task = btf.struct_named(b"task_struct").ok_or(BtfError::NoTaskStruct)?;
        let leader = btf.member(task, b"group_leader", 0).ok_or(BtfError::MissingField("group_leader"))?;
        if btf.kind(btf.skip_modifiers(leader.type_id)) != Some(KIND_PTR) {
            return Err(BtfError::WrongType { field: "group_leader", expected: "a pointer" });
        }
        let start = [&b"start_boottime"[..], b"real_start_time"]
            .iter()
            .find_map(|name| btf.member(task, name, 0))
            .ok_or(BtfError::MissingField("start_boottime"))?;
        let start_type = btf.skip_modifiers(start.type_id);
        if btf.kind(start_type) != Some(KIND_INT) || btf.size(start_type) != Some(8) {
            return Err(BtfError::WrongType { field: "start_boottime", expected: "a 64-bit integer" });
        }
        let bytes_of =
            |bits: u32, field| if bits.is_multiple_of(8) { Ok(bits / 8) } else { Err(BtfError::Unaligned(field)) };
        Ok(Self {
            group_leader: bytes_of(leader.bit_offset, "group_leader")?,
            start_boottime: bytes_of(start.bit_offset, "start_boottime")?,
        })
    }
}

/// Runs `read` on the kernel's BTF, `<sys_root>/kernel/btf/vmlinux`.
pub(super) fn with_vmlinux<T>(
    sys_root: &Path,
    read: impl FnOnce(&[u8]) -> Result<T, BtfError>,
) -> Result<T, TaskFieldsError> {
    let path = sys_root.join("kernel/btf/vmlinux");
    let read_error = |source| TaskFieldsError::Read { path: path.clone(), source };
    let file = File::open(&path).map_err(read_error)?;
    // Private and read-only: the kernel refuses to share its BTF pages writable.
    // SAFETY: a map of a file only the kernel writes (and never after boot).
    let blob = match unsafe { MmapOptions::new().map_copy_read_only(&file) } {
        Ok(map) => Blob::Mapped(map),
        Err(_) => Blob::Read(std::fs::read(&path).map_err(read_error)?),
    };
    read(&blob).map_err(|source| TaskFieldsError::Btf { path, source })
}

/// Byte offsets of members of kernel structs, for the byte counters (`--devices`).
pub(super) struct StructOffsets<'a>(Btf<'a>);

impl<'a> StructOffsets<'a> {
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Self, BtfError> {
        Btf::parse(bytes).map(Self)
    }

    /// `owner.field`'s byte offset (anonymous members looked into), below 64 KiB.
    pub(super) fn offset(&self, owner: &'static str, field: &'static str) -> Result<u16, BtfError> {
        let id = self.0.struct_named(owner.as_bytes()).ok_or(BtfError::NoStruct(owner))?;
        let member = self.0.member(id, field.as_bytes(), 0).ok_or(BtfError::NoMember { owner, field })?;
        if !member.bit_offset.is_multiple_of(8) {
            return Err(BtfError::NoMember { owner, field });
        }
        u16::try_from(member.bit_offset / 8).map_err(|_| BtfError::NoMember { owner, field })
    }
}

struct Member {
    type_id: u32,
    bit_offset: u32,
}

struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Per type id (index 0 is `void`, at `u32::MAX`): where its 12-byte record starts in `types`.
    starts: Vec<u32>,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

impl<'a> Btf<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, BtfError> {
        let magic = bytes.get(..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
        if magic != Some(BTF_MAGIC) {
            return Err(BtfError::NotBtf);
        }
        let field = |at| u32_at(bytes, at).map(|v| v as usize).ok_or(BtfError::Truncated("header"));
        let header_bytes = field(4)?.max(HEADER_BYTES);
        let section = |off: usize, len: usize, what| {
            let start = header_bytes.checked_add(off).ok_or(BtfError::Truncated(what))?;
            bytes.get(start..start.checked_add(len).ok_or(BtfError::Truncated(what))?).ok_or(BtfError::Truncated(what))
        };
        let types = section(field(8)?, field(12)?, "type section")?;
        let strings = section(field(16)?, field(20)?, "string section")?;
        // Smallest records: an upper bound on the count that allocates no more than the section.
        let mut starts = Vec::with_capacity(1 + types.len() / TYPE_BYTES);
        starts.push(u32::MAX);
        let mut at = 0;
        while at < types.len() {
            let info = u32_at(types, at + 4).ok_or(BtfError::Truncated("type"))?;
            let vlen = (info & 0xffff) as usize;
            let extra = match (info >> 24) & 0x1f {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => 12 * vlen,
                6 | 13 => 8 * vlen,
                2 | 7..=12 | 16 | 18 => 0,
                kind => return Err(BtfError::UnknownKind(kind)),
            };
            let end = at + TYPE_BYTES + extra;
            if end > types.len() {
                return Err(BtfError::Truncated("type data"));
            }
            // The section is at most 4 GiB (its length is a u32), so `at` fits.
            starts.push(at as u32);
            at = end;
        }
        Ok(Self { types, strings, starts })
    }

    /// Type `id`'s record and the data after it (empty for `void` or an unknown id).
    fn record(&self, id: u32) -> Option<(&'a [u8], &'a [u8])> {
        let at = *self.starts.get(id as usize).filter(|&&at| at != u32::MAX)? as usize;
        let end = self.starts.get(id as usize + 1).map_or(self.types.len(), |&next| next as usize);
        let record = self.types.get(at..at + TYPE_BYTES)?;
        Some((record, self.types.get(at + TYPE_BYTES..end)?))
    }

    fn name(&self, offset: u32) -> &'a [u8] {
        let rest = self.strings.get(offset as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    fn kind(&self, id: u32) -> Option<u32> {
        self.record(id).and_then(|(r, _)| u32_at(r, 4)).map(|info| (info >> 24) & 0x1f)
    }

    fn size(&self, id: u32) -> Option<u32> {
        self.record(id).and_then(|(r, _)| u32_at(r, 8))
    }

    /// Follows typedefs and qualifiers to the type they name.
    fn skip_modifiers(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.kind(id) {
                Some(KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG) => {
                    id = self.size(id).unwrap_or(0);
                }
                _ => break,
            }
        }
        id
    }

    /// The complete struct called `name` (not a forward declaration, which has no members).
    fn struct_named(&self, name: &[u8]) -> Option<u32> {
        (1..self.starts.len() as u32).find(|&id| {
            self.record(id).is_some_and(|(record, data)| {
                u32_at(record, 4).is_some_and(|info| (info >> 24) & 0x1f == KIND_STRUCT)
                    && !data.is_empty()
                    && self.name(u32_at(record, 0).unwrap_or(0)) == name
            })
        })
    }

    /// `name` among the members of struct or union `id`, looking into anonymous members too;
    /// its offset counts from `id`'s start.
    fn member(&self, id: u32, name: &[u8], depth: u32) -> Option<Member> {
        let (record, data) = self.record(id)?;
        let bitfields = u32_at(record, 4)? >> 31 == 1;
        for m in data.chunks_exact(12) {
            let (name_off, type_id, offset) = (u32_at(m, 0)?, u32_at(m, 4)?, u32_at(m, 8)?);
            let bit_offset = if bitfields { offset & 0x00ff_ffff } else { offset };
            if name_off != 0 {
                if self.name(name_off) == name {
                    return Some(Member { type_id, bit_offset });
                }
                continue;
            }
            let inner = self.skip_modifiers(type_id);
            if depth < MAX_NESTING && matches!(self.kind(inner), Some(KIND_STRUCT | KIND_UNION)) {
                if let Some(found) = self.member(inner, name, depth + 1) {
                    return Some(Member { type_id: found.type_id, bit_offset: bit_offset + found.bit_offset });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob: `member_names` interned first (see `name_offsets`), then `types` as (name,
    /// info, size_or_type, data).
    fn blob(types: &[(&str, u32, u32, Vec<u32>)], member_names: &[&str]) -> Vec<u8> {
        let mut strings = vec![0u8];
        let mut intern = |s: &str| -> u32 {
            if s.is_empty() {
                return 0;
            }
            let at = strings.len() as u32;
            strings.extend_from_slice(s.as_bytes());
            strings.push(0);
            at
        };
        for n in member_names {
            intern(n);
        }
        let mut type_bytes = Vec::new();
        for (name, info, size, data) in types {
            let name_off = intern(name);
            for v in [name_off, *info, *size].iter().chain(data) {
                type_bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        for v in [24u32, 0, type_bytes.len() as u32, type_bytes.len() as u32, strings.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&type_bytes);
        out.extend_from_slice(&strings);
        out
    }

    fn info(kind: u32, vlen: u32) -> u32 {
        kind << 24 | vlen
    }

    /// Member names at their offsets in `blob`'s string section (interned first, in order).
    fn name_offsets(names: &[&str]) -> Vec<u32> {
        let mut at = 1;
        names
            .iter()
            .map(|n| {
                let o = at;
                at += n.len() as u32 + 1;
                o
            })
            .collect()
    }

    #[test]
    fn finds_the_fields_through_typedefs_and_an_anonymous_struct() {
        let names = ["group_leader", "start_boottime", "pid", "u64"];
        let n = name_offsets(&names);
        // 1 int u64 (8 bytes), 2 typedef u64, 3 ptr to 5, 4 anonymous struct {leader @ 64 bits},
        // 5 task_struct {pid @ 0, anon @ 128 bits, start_boottime @ 8000 bits}.
        let types = vec![
            ("", info(KIND_INT, 0), 8, vec![64]),
            ("", info(KIND_TYPEDEF, 0), 1, vec![]),
            ("", info(KIND_PTR, 0), 5, vec![]),
            ("", info(KIND_STRUCT, 1), 16, vec![n[0], 3, 64]),
            ("task_struct", info(KIND_STRUCT, 3), 4096, vec![n[2], 1, 0, 0, 4, 128, n[1], 2, 8000]),
        ];
        let fields = TaskFields::from_btf(&blob(&types, &names)).unwrap();
        assert_eq!(fields, TaskFields { group_leader: 24, start_boottime: 1000 });
        assert_eq!(fields.config_value(), 24 << 32 | 1000);
    }

    #[test]
    fn a_kernel_without_the_fields_or_a_damaged_blob_is_an_error_never_a_panic() {
        let names = ["group_leader", "start_boottime"];
        let n = name_offsets(&names);
        let no_start =
            vec![("", info(KIND_PTR, 0), 2, vec![]), ("task_struct", info(KIND_STRUCT, 1), 64, vec![n[0], 1, 0])];
        let bytes = blob(&no_start, &names);
        assert_eq!(TaskFields::from_btf(&bytes), Err(BtfError::MissingField("start_boottime")));
        for cut in [0, 3, 23, 30, bytes.len() - 1] {
            assert!(TaskFields::from_btf(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut lying = bytes.clone();
        lying[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(TaskFields::from_btf(&lying).is_err());
    }
}
