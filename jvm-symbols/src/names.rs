//! What a perf-map name says about the code behind it.
//!
//! HotSpot (`Compiler.perfmap`) writes `<return type> <class>.<method>(<arg types>)` for
//! compiled methods (`long Spin.work(int)`) and a blob name for everything else
//! (`Interpreter`, `I2C/C2I adapters`, `StubRoutines (1)`, `flush_icache_stub`).
//! perf-map-agent writes `Lcom/acme/Foo;::bar` (optionally with a JVM signature).

/// The kind of code a perf-map entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// A JIT-compiled Java method.
    JavaMethod,
    /// The template interpreter or another code-cache stub.
    Stub,
}

pub fn classify(name: &str) -> CodeKind {
    if is_hotspot_method(name) || agent_method(name).is_some() {
        CodeKind::JavaMethod
    } else {
        CodeKind::Stub
    }
}

/// `com.acme.Foo.bar` for `void com.acme.Foo.bar(int)` or `Lcom/acme/Foo;::bar`; any
/// other name is returned as it is.
pub fn short_name(name: &str) -> std::borrow::Cow<'_, str> {
    if is_hotspot_method(name) {
        let head = &name[..name.find('(').unwrap_or(name.len())];
        return head.rsplit(' ').next().unwrap_or(head).into();
    }
    if let Some((class, method)) = agent_method(name) {
        return format!("{}.{}", class.replace('/', "."), method).into();
    }
    name.into()
}

/// A class or method name as it reads on every run: a hidden class's address
/// (`Mix$$Lambda$14/0x0000000800c02a00`, `LambdaForm$MH/0x...`), a lambda's counter
/// (`$$Lambda$14`) and a proxy's (`$Proxy12`) depend on load order and where the JVM put the
/// class, so `Mix$$Lambda$14/0x0000000800c02a00.run` reads `Mix$$Lambda.run`, as in JFR's
/// stack traces. Any other name is returned as it is.
pub fn stable_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.contains("/0x") && !name.contains("$$Lambda$") && !name.contains("$Proxy") {
        return name.into();
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        match varying_part(rest) {
            Some((kept, len)) => {
                out.push_str(kept);
                rest = &rest[len..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out.into()
}

/// At the start of `s`, a part of a name that differs between runs: what is kept of it and
/// its length in bytes.
fn varying_part(s: &str) -> Option<(&'static str, usize)> {
    for (prefix, kept, is_digit) in [
        ("/0x", "", u8::is_ascii_hexdigit as fn(&u8) -> bool),
        ("$$Lambda$", "$$Lambda", u8::is_ascii_digit),
        ("$Proxy", "$Proxy", u8::is_ascii_digit),
    ] {
        if let Some(after) = s.strip_prefix(prefix) {
            let digits = after.bytes().take_while(is_digit).count();
            if digits > 0 {
                return Some((kept, prefix.len() + digits));
            }
        }
    }
    None
}

/// `<type> <qualified.name>(<args>)`: a space before the `(`, a `.` in the method part,
/// and a closing `)` at the end.
fn is_hotspot_method(name: &str) -> bool {
    let Some(open) = name.find('(') else {
        return false;
    };
    let head = &name[..open];
    name.ends_with(')')
        && head.rsplit_once(' ').is_some_and(|(ret, qualified)| !ret.is_empty() && qualified.contains('.'))
}

/// `L<class>;::<method>[<signature>]` → (class, method).
fn agent_method(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix('L')?;
    let (class, method) = rest.split_once(";::")?;
    let method = &method[..method.find('(').unwrap_or(method.len())];
    (!class.is_empty() && !method.is_empty()).then_some((class, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_methods() {
        for (full, short) in [
            ("long Spin.work(int)", "Spin.work"),
            ("void com.acme.Foo.bar(int)", "com.acme.Foo.bar"),
            ("void java.lang.Object.<init>()", "java.lang.Object.<init>"),
            (
                "java.lang.Object jdk.internal.misc.Unsafe.getReferenceVolatile(java.lang.Object, long)",
                "jdk.internal.misc.Unsafe.getReferenceVolatile",
            ),
            ("java.lang.String[] a.B.c(int[], java.util.List)", "a.B.c"),
            ("void a.B$$Lambda$14/0x0000000800c02a00.run()", "a.B$$Lambda$14/0x0000000800c02a00.run"),
        ] {
            assert_eq!(classify(full), CodeKind::JavaMethod, "{full}");
            assert_eq!(short_name(full), short, "{full}");
        }
    }

    #[test]
    fn names_are_stable_across_runs() {
        for (raw, stable) in [
            ("Mix$$Lambda$1/0x00007f68d8000a08.run", "Mix$$Lambda.run"),
            ("Mix$$Lambda/0x00007f68d8000a08.run", "Mix$$Lambda.run"),
            ("void a.B$$Lambda$14/0x0000000800c02a00.run()", "void a.B$$Lambda.run()"),
            ("java.lang.invoke.LambdaForm$MH/0x0000000800c0c400.invoke", "java.lang.invoke.LambdaForm$MH.invoke"),
            ("jdk.proxy1.$Proxy12.hello", "jdk.proxy1.$Proxy.hello"),
            ("com.sun.proxy.$Proxy3.run", "com.sun.proxy.$Proxy.run"),
            // Nothing varying: as it is.
            ("java.lang.Thread.run", "java.lang.Thread.run"),
            ("a.$Proxy.b", "a.$Proxy.b"),
            ("a/0xzz.$$Lambda$x", "a/0xzz.$$Lambda$x"),
            ("I2C/C2I adapters", "I2C/C2I adapters"),
        ] {
            assert_eq!(stable_name(raw), stable, "{raw}");
        }
    }

    #[test]
    fn stubs() {
        for stub in [
            "Interpreter",
            "I2C/C2I adapters",
            "StubRoutines (1)",
            "flush_icache_stub",
            "delayed StackOverflowError throw_exception",
            "method entry point (kind = zerolocals)",
        ] {
            assert_eq!(classify(stub), CodeKind::Stub, "{stub}");
            assert_eq!(short_name(stub), stub);
        }
    }

    #[test]
    fn perf_map_agent_methods() {
        assert_eq!(classify("Lcom/acme/Foo;::bar"), CodeKind::JavaMethod);
        assert_eq!(short_name("Lcom/acme/Foo;::bar"), "com.acme.Foo.bar");
        assert_eq!(short_name("Lcom/acme/Foo;::bar(I)V"), "com.acme.Foo.bar");
        assert_eq!(classify("Lonely"), CodeKind::Stub);
    }
}
