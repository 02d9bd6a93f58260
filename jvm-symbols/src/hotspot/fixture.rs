//! Recorded fixtures: the memory a set of queries read from a live JVM, and a manifest
//! saying where the tables are and which pcs were queried. `cargo xtask
//! dump-hotspot-fixture` writes them; unit tests replay the same queries without a JVM.
//!
//! `manifest.txt` lines: `version <major.minor.security+build>`, `symbol <name> <addr>`,
//! `nmethod <addr>` (the workload's nmethods), `pc <addr>` (queried with `code_at`),
//! `interpreter_pc <addr>`, `stub_pc <addr>` (the call stub's return address),
//! `adapter_pc <addr>` (an I2C/C2I adapter). `memory.bin` is [`SegmentsMemory::to_bytes`].

use std::fmt::Write as _;

use super::codecache::{self, BlobKind};
use super::error::HotspotError;
use super::jvm::HotspotJvm;
use super::libjvm::TableSymbols;
use super::memory::{MemoryReader, RecordingReader, SegmentsMemory};
use super::scopes::NmethodDebugInfo;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub version: String,
    pub symbols: TableSymbols,
    pub nmethods: Vec<u64>,
    pub pcs: Vec<u64>,
    pub interpreter_pc: Option<u64>,
    pub stub_pc: Option<u64>,
    pub adapter_pc: Option<u64>,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

impl Manifest {
    pub fn to_text(&self) -> String {
        let mut out = format!("version {}\n", self.version);
        for (name, addr) in &self.symbols.addrs {
            let _ = writeln!(out, "symbol {name} {addr:#x}");
        }
        for n in &self.nmethods {
            let _ = writeln!(out, "nmethod {n:#x}");
        }
        for pc in &self.pcs {
            let _ = writeln!(out, "pc {pc:#x}");
        }
        if let Some(pc) = self.interpreter_pc {
            let _ = writeln!(out, "interpreter_pc {pc:#x}");
        }
        if let Some(pc) = self.stub_pc {
            let _ = writeln!(out, "stub_pc {pc:#x}");
        }
        if let Some(pc) = self.adapter_pc {
            let _ = writeln!(out, "adapter_pc {pc:#x}");
        }
        out
    }

    /// Parses [`Manifest::to_text`]; `None` names the first bad line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut m = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("bad manifest line: {line}");
            match f.as_slice() {
                ["version", v] => m.version = (*v).to_owned(),
                ["symbol", name, addr] => {
                    m.symbols.addrs.insert((*name).to_owned(), hex(addr).ok_or_else(bad)?);
                }
                ["nmethod", a] => m.nmethods.push(hex(a).ok_or_else(bad)?),
                ["pc", a] => m.pcs.push(hex(a).ok_or_else(bad)?),
                ["interpreter_pc", a] => m.interpreter_pc = Some(hex(a).ok_or_else(bad)?),
                ["stub_pc", a] => m.stub_pc = Some(hex(a).ok_or_else(bad)?),
                ["adapter_pc", a] => m.adapter_pc = Some(hex(a).ok_or_else(bad)?),
                _ => return Err(bad()),
            }
        }
        Ok(m)
    }
}

/// Flags whose values a fixture holds (read from the JVM's flag table).
pub const RECORDED_FLAGS: [&str; 3] = ["PreserveFramePointer", "DebugNonSafepoints", "NoSuchFlagAnywhere"];

/// Blocks visited per heap when looking for the workload's nmethods.
const MAX_BLOCKS: usize = 1 << 16;

/// Runs the fixture queries against `reader` (a live JVM) and returns what they read: the
/// tables, every nmethod whose holder class is `class` (each PcDesc's pc queried, which
/// covers inlined scopes and line tables), one interpreter pc, the call stub's return
/// address, one adapter pc, and the start of every stub the JVM describes and every
/// exported stub entry.
pub fn record<R: MemoryReader>(
    reader: R,
    symbols: &TableSymbols,
    class: &str,
) -> Result<(SegmentsMemory, Manifest), HotspotError> {
    let rec = RecordingReader::new(reader);
    let mut jvm = HotspotJvm::new(&rec, symbols)?;
    let layout = jvm.layout().clone();
    let v = layout.version;
    let mut manifest = Manifest {
        version: format!("{}.{}.{}+{}", v.major, v.minor, v.security, v.build),
        symbols: symbols.clone(),
        ..Manifest::default()
    };
    let code = layout.code.clone().ok_or_else(|| HotspotError::MissingField { what: "code cache fields".into() })?;
    let heaps = jvm.code_heaps().to_vec();
    // Enumerate with a plain reader's view of the same memory, so the walk itself (every
    // block header in the cache) is not recorded.
    let mut found = Vec::new();
    for heap in &heaps {
        for block in codecache::blocks(rec.inner(), &code, heap, MAX_BLOCKS) {
            let Ok(blob) = codecache::read_blob(rec.inner(), &code, block + code.heap_block_size) else {
                continue;
            };
            match blob.kind {
                BlobKind::Nmethod { method, .. } => found.push((blob, method)),
                BlobKind::Other if blob.name == "I2C/C2I adapters" && manifest.adapter_pc.is_none() => {
                    manifest.adapter_pc = Some(blob.code_begin);
                }
                BlobKind::Other => {}
            }
        }
    }
    for (blob, method) in found {
        let is_workload = super::method::read_method(rec.inner(), &layout.methods, layout.encoding, method)
            .is_ok_and(|m| m.class == class);
        if !is_workload {
            continue;
        }
        manifest.nmethods.push(blob.address);
        let Some(scopes) = &layout.scopes else {
            continue;
        };
        let Ok(Some(info)) =
            NmethodDebugInfo::read(rec.inner(), scopes, layout.encoding, blob.address, method, blob.code_begin)
        else {
            continue;
        };
        manifest.pcs.extend(info.described_pcs());
        manifest.pcs.push(blob.code_begin + (blob.address + blob.size_bytes - blob.code_begin) / 2);
    }
    manifest.interpreter_pc = jvm.interpreter_bounds().map(|(lo, hi)| lo + (hi - lo) / 2);
    manifest.stub_pc = layout
        .stub_entry_fields
        .iter()
        .find(|(name, _)| name == "StubRoutines::call_stub")
        .and_then(|(_, field)| rec.inner().read_u64(*field).ok());
    // The flags the tests read, through the recording reader.
    for flag in RECORDED_FLAGS {
        jvm.bool_flag(flag);
    }
    // The replayed queries, in the order the tests make them.
    let singles = [manifest.interpreter_pc, manifest.stub_pc, manifest.adapter_pc];
    for pc in manifest.pcs.iter().chain(singles.iter().flatten()) {
        jvm.code_at(*pc);
        jvm.blob_at(*pc);
    }
    // Every stub the JVM describes, and every exported stub entry, named (`stub_names`).
    let stub_pcs: Vec<u64> =
        jvm.stub_ranges().iter().map(|r| r.begin).chain(jvm.stub_entries().map(|(pc, _)| pc)).collect();
    for pc in stub_pcs {
        jvm.code_at(pc);
    }
    drop(jvm);
    Ok((rec.recorded(), manifest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_rejects_bad_lines() {
        let mut m = Manifest {
            version: "17.0.15+6".into(),
            nmethods: vec![0x7f00_0000_1000],
            pcs: vec![0x10, 0x20],
            interpreter_pc: Some(0x30),
            stub_pc: None,
            adapter_pc: Some(0x40),
            ..Manifest::default()
        };
        m.symbols.addrs.insert("gHotSpotVMStructs".into(), 0x1234);
        assert_eq!(Manifest::parse(&m.to_text()), Ok(m));
        assert!(Manifest::parse("pc 12").is_err(), "addresses are 0x-prefixed");
        assert!(Manifest::parse("what 0x1").is_err());
    }
}
