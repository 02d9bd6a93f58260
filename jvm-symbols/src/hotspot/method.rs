//! `Method*` to class, name, signature and line table, with a check that the `Method*`
//! is still what its holder class lists: the address came from a sample and may have been
//! freed (class unloading, redefinition) and reused since.
//!
//! Path: `Method::_constMethod` -> `ConstMethod::_constants` -> `ConstantPool::_pool_holder`
//! (the class). Names are constant-pool symbols at `ConstMethod::_name_index` and
//! `_signature_index`. The check: the holder's `InstanceKlass::_methods` array must hold
//! this very `Method*` (at `ConstMethod::_method_idnum`, or anywhere after a redefinition).
//! ConstMethod has no back-pointer field of its own; this array is the back-pointer.

use super::layout::{Field, MethodLayout};
use super::memory::{MemoryReader, ReadError};
use super::stream::{decode_line_table, line_for_bci, Encoding, LineEntry};

/// A Java method, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaMethod {
    /// Dotted class name (`java.lang.Thread`); hidden classes keep their `+0x...` suffix.
    pub class: String,
    pub name: String,
    /// JVM descriptor, `(I)J`.
    pub signature: String,
    /// The `ConstMethod*` it was read through: a cached entry is revalidated against it.
    pub const_method: u64,
    /// Address of the first bytecode (bcp - this = bci).
    pub code_start: u64,
    pub code_size: u32,
    /// Empty when the class has no line numbers.
    pub lines: Vec<LineEntry>,
}

impl JavaMethod {
    /// `com.acme.Foo.bar`, the form tables and CSVs use.
    /// `com.acme.Foo.bar`, with the class as every run names it ([`stable_class`]).
    ///
    /// [`stable_class`]: JavaMethod::stable_class
    pub fn short_name(&self) -> String {
        format!("{}.{}", self.stable_class(), self.name)
    }

    /// The class without what differs between runs of the same program (a hidden class's
    /// address, a lambda's or proxy's counter): `Mix$$Lambda`, as JFR's stack traces read.
    pub fn stable_class(&self) -> String {
        crate::names::stable_name(&self.external_class()).into_owned()
    }

    /// The class as Java and HotSpot's own output name it: a hidden class's `+0x...`
    /// suffix (how the tables spell it) reads `/0x...` (`Foo$$Lambda$14/0x0000000800c02a00`),
    /// as in stack traces, JFR and perf maps.
    pub fn external_class(&self) -> std::borrow::Cow<'_, str> {
        match self.class.rfind("+0x") {
            Some(i) => format!("{}/{}", &self.class[..i], &self.class[i + 1..]).into(),
            None => self.class.as_str().into(),
        }
    }

    /// `long com.acme.Foo.bar(int, java.lang.String[])`: the form HotSpot's perf map
    /// (`Compiler.perfmap`) uses, from the JVM descriptor, with the stable class name. A descriptor that does not parse
    /// is shown as it is after the name (`com.acme.Foo.bar(I`).
    pub fn full_name(&self) -> String {
        match parse_descriptor(&self.signature) {
            Some((args, ret)) => format!("{ret} {}.{}({})", self.stable_class(), self.name, args.join(", ")),
            None => format!("{}.{}{}", self.stable_class(), self.name, self.signature),
        }
    }

    /// The full name with the class as the JVM names it (`void a.B$$Lambda$14/0x...run()`),
    /// when it differs from [`JavaMethod::full_name`].
    pub fn raw_full_name(&self) -> Option<String> {
        let class = self.external_class();
        if crate::names::stable_name(&class) == class {
            return None;
        }
        Some(match parse_descriptor(&self.signature) {
            Some((args, ret)) => format!("{ret} {class}.{}({})", self.name, args.join(", ")),
            None => format!("{class}.{}{}", self.name, self.signature),
        })
    }

    /// Approximate heap bytes this entry holds (for cache budgets).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.class.len()
            + self.name.len()
            + self.signature.len()
            + self.lines.len() * std::mem::size_of::<LineEntry>()
    }

    pub fn line_for_bci(&self, bci: i32) -> Option<u32> {
        // The entry bci (-1) is on the line of bci 0, as `Method::line_number_from_bci` has it.
        line_for_bci(&self.lines, bci.max(0) as u32)
    }

    /// The bci of a bytecode pointer read from an interpreter frame, if it is inside this
    /// method's bytecodes.
    pub fn bci_of_bcp(&self, bcp: u64) -> Option<i32> {
        let off = bcp.checked_sub(self.code_start)?;
        (off < u64::from(self.code_size)).then_some(off as i32)
    }
}

/// One field type of a JVM descriptor at the start of `d`: its Java name and the rest.
fn parse_field_type(d: &str) -> Option<(String, &str)> {
    let dims = d.bytes().take_while(|&b| b == b'[').count();
    let rest = &d[dims..];
    let (base, rest) = match rest.as_bytes().first()? {
        b'L' => {
            let end = rest.find(';')?;
            (rest[1..end].replace('/', "."), &rest[end + 1..])
        }
        c => {
            let name = match c {
                b'B' => "byte",
                b'C' => "char",
                b'D' => "double",
                b'F' => "float",
                b'I' => "int",
                b'J' => "long",
                b'S' => "short",
                b'Z' => "boolean",
                b'V' if dims == 0 => "void",
                _ => return None,
            };
            (name.to_owned(), &rest[1..])
        }
    };
    Some((base + &"[]".repeat(dims), rest))
}

/// `(I[Ljava/lang/String;)J` -> (["int", "java.lang.String[]"], "long").
fn parse_descriptor(descriptor: &str) -> Option<(Vec<String>, String)> {
    let mut rest = descriptor.strip_prefix('(')?;
    let mut args = Vec::new();
    while !rest.starts_with(')') {
        let (arg, more) = parse_field_type(rest)?;
        args.push(arg);
        rest = more;
    }
    let (ret, tail) = parse_field_type(&rest[1..])?;
    tail.is_empty().then_some((args, ret))
}

/// Why a `Method*` could not be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MethodMiss {
    #[error(transparent)]
    Unreadable(#[from] ReadError),
    /// Readable, but its holder does not list it: freed and reused, or never a Method*.
    #[error("Method* {0:#x} is not listed by its holder class (stale or not a Method*)")]
    Stale(u64),
    /// Readable, but with values no live Method has (an index past the constant pool...).
    #[error("Method* {0:#x} has inconsistent fields")]
    Corrupt(u64),
}

/// Longest class, method or signature name read (HotSpot's own limit is 65535 bytes).
const MAX_SYMBOL_BYTES: u64 = 65535;
/// More methods than a class file can declare.
const MAX_METHODS: u64 = 65536;
/// Line tables are read in chunks of this many bytes, at most 64 of them.
const LINE_TABLE_CHUNK: usize = 256;
const MAX_LINE_TABLE_CHUNKS: usize = 64;

/// Bytes of a symbol's body read together with its header; longer names take a second read.
const SYMBOL_FIRST_READ: usize = 96;

pub fn read_symbol(reader: &impl MemoryReader, l: &MethodLayout, symbol: u64) -> Result<String, ReadError> {
    let body = l.symbol_body as usize;
    let mut first = [0u8; SYMBOL_FIRST_READ];
    // One read for header and short bodies, unless it would cross into the next page
    // (which may be unmapped): then header and body separately.
    let room = (4096 - symbol % 4096) as usize;
    let (len, bytes) = if room >= SYMBOL_FIRST_READ && reader.read(symbol, &mut first).is_ok() {
        let len = l.symbol_length.get(&first).unwrap_or(0).min(MAX_SYMBOL_BYTES) as usize;
        (len, first.get(body..body + len).map(<[u8]>::to_vec))
    } else {
        let len = l.symbol_length.read(reader, symbol)?.min(MAX_SYMBOL_BYTES) as usize;
        (len, None)
    };
    let bytes = match bytes {
        Some(b) => b,
        None => reader.read_vec(symbol.wrapping_add(l.symbol_body), len)?,
    };
    // Modified UTF-8 differs from UTF-8 only for NUL and supplementary characters.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn pool_symbol(
    reader: &impl MemoryReader,
    l: &MethodLayout,
    pool: u64,
    pool_length: u64,
    index: u64,
    m: u64,
) -> Result<String, MethodMiss> {
    if index == 0 || index >= pool_length {
        return Err(MethodMiss::Corrupt(m));
    }
    let symbol = reader.read_u64(pool.wrapping_add(l.constant_pool_size).wrapping_add(index.wrapping_mul(8)))?;
    Ok(read_symbol(reader, l, symbol)?)
}

/// Is `m` listed in `holder`'s methods array? Read whole, in one read: `_method_idnum` is
/// the index of most methods, but not of overpass methods added after the class was parsed.
fn holder_lists(
    reader: &impl MemoryReader,
    l: &MethodLayout,
    holder: u64,
    m: u64,
    idnum: u64,
) -> Result<bool, ReadError> {
    let methods = reader.read_u64(holder + l.instance_klass_methods)?;
    let len = u64::from(reader.read_u32(methods + l.array_length)?);
    if len > MAX_METHODS {
        return Ok(false);
    }
    let all = reader.read_vec(methods.wrapping_add(l.method_array_data), len as usize * 8)?;
    let mut listed = all.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
    Ok(listed.clone().nth(idnum as usize) == Some(m) || listed.any(|x| x == m))
}

/// Method-handle intrinsics (`linkToStatic`, `invokeBasic`...) are generated `Method`s with
/// a private constant pool whose holder is `MethodHandle`, and no class lists them.
fn is_method_handle_intrinsic(
    reader: &impl MemoryReader,
    l: &MethodLayout,
    holder: u64,
    pool: u64,
) -> Result<bool, ReadError> {
    let Some(constants) = l.instance_klass_constants else {
        return Ok(false);
    };
    let class = read_symbol(reader, l, reader.read_u64(holder + l.klass_name)?)?;
    Ok(class == "java/lang/invoke/MethodHandle" && reader.read_u64(holder + constants)? != pool)
}

fn read_line_table(reader: &impl MemoryReader, start: u64, encoding: Encoding) -> Option<Vec<LineEntry>> {
    let mut bytes = Vec::new();
    for _ in 0..MAX_LINE_TABLE_CHUNKS {
        let mut chunk = [0u8; LINE_TABLE_CHUNK];
        let at = start + bytes.len() as u64;
        // Stay inside the page: metaspace chunks end at page boundaries.
        let n = LINE_TABLE_CHUNK.min((4096 - at % 4096) as usize);
        reader.read(at, &mut chunk[..n]).ok()?;
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(table) = decode_line_table(&bytes, encoding) {
            return Some(table);
        }
    }
    None
}

/// Reads and checks the method at `m`.
pub fn read_method(
    reader: &impl MemoryReader,
    l: &MethodLayout,
    encoding: Encoding,
    m: u64,
) -> Result<JavaMethod, MethodMiss> {
    let corrupt = MethodMiss::Corrupt(m);
    let cm = reader.read_u64(m + l.method_const_method)?;
    // Each header in one read, then its fields from the copy.
    // Object sizes are bounded by the layout (`layout::MAX_OBJECT_SIZE_BYTES`).
    let cm_bytes = reader.read_vec(cm, l.const_method_size as usize)?;
    let cm_field = |f: &Field| f.get(&cm_bytes).ok_or(corrupt);
    let pool = read_ptr(&cm_bytes, l.const_method_constants).ok_or(corrupt)?;
    let pool_bytes = reader.read_vec(pool, l.constant_pool_size as usize)?;
    let holder = read_ptr(&pool_bytes, l.constant_pool_holder).ok_or(corrupt)?;
    let pool_length = l.constant_pool_length.get(&pool_bytes).ok_or(corrupt)?;
    if !holder_lists(reader, l, holder, m, cm_field(&l.const_method_idnum)?)?
        && !is_method_handle_intrinsic(reader, l, holder, pool)?
    {
        return Err(MethodMiss::Stale(m));
    }
    let class = read_symbol(reader, l, reader.read_u64(holder + l.klass_name)?)?.replace('/', ".");
    let name = pool_symbol(reader, l, pool, pool_length, cm_field(&l.const_method_name_index)?, m)?;
    let signature = pool_symbol(reader, l, pool, pool_length, cm_field(&l.const_method_signature_index)?, m)?;
    let code_size = cm_field(&l.const_method_code_size)? as u32;
    let code_start = cm + l.const_method_size;
    let lines = if cm_field(&l.const_method_flags)? & l.has_linenumber_table_flag != 0 {
        // The compressed line-number table starts right after the bytecodes.
        read_line_table(reader, code_start + u64::from(code_size), encoding).unwrap_or_default()
    } else {
        Vec::new()
    };
    Ok(JavaMethod { class, name, signature, const_method: cm, code_start, code_size, lines })
}

fn read_ptr(bytes: &[u8], offset: u64) -> Option<u64> {
    Field { offset, size_bytes: 8 }.get(bytes)
}

/// Is the cached `method` still what `m` points to? One read: the `ConstMethod*`.
pub fn still_valid(reader: &impl MemoryReader, l: &MethodLayout, m: u64, method: &JavaMethod) -> bool {
    reader.read_u64(m + l.method_const_method) == Ok(method.const_method)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(class: &str, name: &str, signature: &str) -> JavaMethod {
        JavaMethod {
            class: class.into(),
            name: name.into(),
            signature: signature.into(),
            const_method: 0,
            code_start: 0,
            code_size: 0,
            lines: Vec::new(),
        }
    }

    #[test]
    fn full_names_read_like_hotspot_perf_map_entries() {
        for (class, name, sig, want) in [
            ("HotLoop", "churn", "(I)J", "long HotLoop.churn(int)"),
            ("java.lang.Object", "<init>", "()V", "void java.lang.Object.<init>()"),
            (
                "a.B",
                "c",
                "([I[[Ljava/util/List;ZCBSFD)[Ljava/lang/String;",
                "java.lang.String[] a.B.c(int[], java.util.List[][], boolean, char, byte, short, float, double)",
            ),
        ] {
            let m = method(class, name, sig);
            assert_eq!(m.full_name(), want);
            // The perf-map path's short form comes out of it unchanged.
            assert_eq!(crate::names::short_name(&m.full_name()), m.short_name());
        }
    }

    #[test]
    fn hidden_classes_read_the_same_on_every_run() {
        let m = method("a.B$$Lambda$14+0x0000000800c02a00", "run", "()V");
        assert_eq!(m.external_class(), "a.B$$Lambda$14/0x0000000800c02a00");
        assert_eq!(m.short_name(), "a.B$$Lambda.run");
        assert_eq!(m.full_name(), "void a.B$$Lambda.run()");
        assert_eq!(m.raw_full_name().as_deref(), Some("void a.B$$Lambda$14/0x0000000800c02a00.run()"));
        assert_eq!(method("a.B", "c", "()V").raw_full_name(), None, "a stable name has no raw one");
        assert_eq!(crate::names::short_name(&m.full_name()), m.short_name());
        assert_eq!(method("a.C+D", "e", "()V").short_name(), "a.C+D.e");
    }

    #[test]
    fn malformed_descriptors_are_shown_raw() {
        for sig in ["(I", "I)V", "(Q)V", "(I)V;", "([V)V", "(Ljava/lang/String)V"] {
            assert_eq!(method("A", "b", sig).full_name(), format!("A.b{sig}"), "{sig}");
        }
    }
}
