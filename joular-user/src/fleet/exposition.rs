//! The Prometheus text exposition format 0.0.4, written by hand: a family header, then samples.

use std::fmt::Write;

use crate::printable::printable;

/// The `Content-Type` of what `Exposition` writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// Accumulates one exposition. Families must be written whole (header, then all their samples),
/// which the format requires.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    pub fn family(&mut self, name: &str, help: &str, kind: MetricKind) {
        let kind = match kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                escape_label_value(&mut self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        self.text.push(' ');
        push_value(&mut self.text, value);
        self.text.push('\n');
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// The format's three escapes (`\\`, `\"`, `\n`). It has no other: any other control character
/// (an ESC in a comm) is shown as `\xHH` text, its backslash escaped, so nothing raw reaches a
/// scraper or the terminal of whoever reads the page.
fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => {
                for shown in printable(c.encode_utf8(&mut [0; 4])).chars() {
                    if shown == '\\' {
                        out.push_str("\\\\");
                    } else {
                        out.push(shown);
                    }
                }
            }
        }
    }
}

/// Rust prints `inf`/`NaN`; the format spells them `+Inf`, `-Inf`, `NaN`. Finite values use Rust's
/// shortest round-trip form, which Prometheus parses.
fn push_value(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_header_and_escaped_samples() {
        let mut e = Exposition::default();
        e.family("x_total", "Line one\\two\nthree.", MetricKind::Counter);
        e.sample("x_total", &[("a", "q\"uote"), ("b", "back\\slash\nnl")], 1.5);
        e.sample("x_total", &[], 2.0);
        assert_eq!(
            e.finish(),
            "# HELP x_total Line one\\\\two\\nthree.\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"uote\",b=\"back\\\\slash\\nnl\"} 1.5\nx_total 2\n"
        );
    }

    #[test]
    fn control_characters_in_label_values_are_shown_as_text() {
        let mut e = Exposition::default();
        e.sample("x", &[("comm", "\x1b[31m<a&\"'>\t\u{85}")], 1.0);
        assert_eq!(e.finish(), "x{comm=\"\\\\x1b[31m<a&\\\"'>\\\\x09\\\\x85\"} 1\n");
    }

    #[test]
    fn special_values_use_the_format_spelling() {
        let mut e = Exposition::default();
        e.family("g", "h", MetricKind::Gauge);
        for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-7, 123456789.25] {
            e.sample("g", &[], v);
        }
        let text = e.finish();
        let values: Vec<&str> = text.lines().skip(2).map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(values, ["+Inf", "-Inf", "NaN", "0.0000001", "123456789.25"]);
        assert!(text.contains("# TYPE g gauge\n"));
    }
}
