//! SVG flame graphs (inferno) weighted by energy, with inferno's Java palette: JIT frames
//! green, inlined aqua, kernel orange, native yellow/red.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};

use super::OutputError;

/// Renders annotated folded lines (sorted, as `folded::folded_lines` returns them).
pub fn write_svg(path: &Path, title: &str, annotated_lines: &[String]) -> Result<(), OutputError> {
    let file = File::create(path).map_err(|e| OutputError::io(path, e))?;
    let mut options = Options::default();
    options.title = title.to_owned();
    options.count_name = "µJ".to_owned();
    options.colors = Palette::Multi(MultiPalette::Java);
    // Colours from the name, so the same method looks the same in every graph.
    options.hash = true;
    // The lines come sorted; sorting again is the slowest part on 50k stacks.
    options.no_sort = true;
    if annotated_lines.is_empty() {
        // inferno refuses empty input; an empty run still gets a (blank) graph.
        options.subtitle = Some("no energy was attributed".to_owned());
        return flamegraph::from_lines(&mut options, ["(none) 1"].into_iter(), BufWriter::new(file))
            .map_err(|e| OutputError::io(path, e));
    }
    flamegraph::from_lines(&mut options, annotated_lines.iter().map(String::as_str), BufWriter::new(file))
        .map_err(|e| OutputError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quick_xml::events::Event;

    /// Parses the whole document (so it is well-formed XML) and returns its text nodes.
    fn svg_texts(path: &Path) -> Vec<String> {
        let xml = std::fs::read_to_string(path).unwrap();
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut texts = Vec::new();
        loop {
            match reader.read_event().unwrap() {
                Event::Eof => break,
                Event::Text(t) => texts.push(t.unescape().unwrap().into_owned()),
                _ => {}
            }
        }
        texts
    }

    #[test]
    fn svg_is_valid_xml_naming_the_hot_method() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f.svg");
        let lines = vec![
            "java.lang.Thread.run_[j];com.acme.App.compute_[j];java.math.BigInteger.multiply_[j] 9000".to_owned(),
            "java.lang.Thread.run_[j];com.acme.App.compute_[j];write;ksys_write_[k] 1000".to_owned(),
        ];
        write_svg(&path, "Energy", &lines).unwrap();
        let texts = svg_texts(&path);
        let hot = texts.iter().find(|t| t.starts_with("java.math.BigInteger.multiply")).expect("hot frame title");
        assert!(hot.contains("9,000 µJ"), "{hot}");
        assert!(texts.iter().any(|t| t.starts_with("ksys_write")), "kernel frame kept");
    }

    #[test]
    fn empty_input_still_makes_an_svg() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("e.svg");
        write_svg(&path, "Energy", &[]).unwrap();
        assert!(svg_texts(&path).iter().any(|t| t.contains("no energy")));
    }
}
