//! SVG flame graphs (inferno) weighted by energy, with inferno's Java palette: JIT frames
//! green, inlined aqua, kernel orange, native yellow/red.

use std::borrow::Cow;
use std::io::Write;

use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};

use super::OutputError;
use crate::attribution::stacks::aggregate::PathGroup;
use crate::printable::printable;
use crate::safe_write::OutDir;

/// Frames narrower than this share of the total are cut before inferno sees them: inferno
/// does not draw frames under 0.1 px of 1200 (≈ 8e-5), and handing it every one of 50,000
/// deep stacks costs seconds and hundreds of MB for nothing visible. Half its threshold, so
/// every frame it would draw is kept; a cut path's energy stays in its visible parent.
const PRUNE_SHARE: f64 = 4e-5;
/// What a stack of one nameless frame is drawn as.
const UNNAMED: &str = "[unnamed]";

/// Writes a whole file (the SVG, `report.html`) in `dir`, replacing what was at `name`.
pub fn write_bytes(dir: &OutDir, name: &str, bytes: &[u8]) -> Result<(), OutputError> {
    let path = &dir.join(name);
    let mut file = dir.replace(name).map_err(|e| OutputError::io(path, e))?;
    file.write_all(bytes).map_err(|e| OutputError::io(path, e))?;
    file.commit().map_err(|e| OutputError::io(path, e))
}

/// The SVG document of path groups (in path order, as `aggregate::path_groups` returns them:
/// the cut below relies on shared prefixes being adjacent).
pub fn render_svg(title: &str, groups: &[PathGroup]) -> std::io::Result<Vec<u8>> {
    let mut options = Options::default();
    // inferno escapes markup, not the control characters XML forbids (a comm may hold an ESC).
    options.title = printable(title).into_owned();
    options.count_name = "µJ".to_owned();
    options.colors = Palette::Multi(MultiPalette::Java);
    // Colours from the name, so the same method looks the same in every graph.
    options.hash = true;
    // `visible_lines` sorts what it returns.
    options.no_sort = true;
    let lines = visible_lines(groups);
    let mut svg = Vec::new();
    if lines.is_empty() {
        // inferno refuses empty input; an empty run still gets a (blank) graph.
        options.subtitle = Some("no energy was attributed".to_owned());
        flamegraph::from_lines(&mut options, ["(none) 1"], &mut svg)?;
    } else {
        let mut lines: Vec<Cow<str>> = lines.iter().map(|l| printable(l)).collect();
        // Shown as text, a control character sorts elsewhere (found by the `documents` fuzz
        // target): inferno checks the order it was promised.
        lines.sort_unstable();
        flamegraph::from_lines(&mut options, lines.iter().map(|l| &**l), &mut svg)?;
    }
    Ok(svg)
}

/// Annotated folded lines, sorted, with every path cut at its first frame narrower than
/// `PRUNE_SHARE` of the total and equal cut paths merged.
fn visible_lines(groups: &[PathGroup]) -> Vec<String> {
    let threshold_uj = groups.iter().map(|g| g.energy_uj).sum::<f64>() * PRUNE_SHARE;
    let mut keep: Vec<usize> = groups.iter().map(|g| g.frames.len()).collect();
    // open[d] = (first group, energy) of the frame at depth d shared with the current path.
    let mut open: Vec<(usize, f64)> = Vec::new();
    for i in 0..=groups.len() {
        let shared = match (i.checked_sub(1), groups.get(i)) {
            (Some(prev), Some(group)) => common_prefix(&groups[prev], group),
            _ => 0,
        };
        while open.len() > shared {
            let depth = open.len() - 1;
            let (first, energy_uj) = open.pop().expect("len > shared");
            if energy_uj < threshold_uj {
                for k in &mut keep[first..i] {
                    *k = (*k).min(depth);
                }
            }
        }
        let Some(group) = groups.get(i) else { break };
        open.resize(group.frames.len(), (i, 0.0));
        for frame in &mut open {
            frame.1 += group.energy_uj;
        }
    }

    // What is left is small; inferno wants it sorted as text, duplicates merged.
    let mut cut: Vec<(String, f64)> = groups
        .iter()
        .zip(&keep)
        .map(|(group, &depth)| {
            let frames = &group.frames[..depth.max(1)];
            (crate::attribution::stacks::methods::join_frames(frames.iter().copied(), true), group.energy_uj)
        })
        .collect();
    cut.sort_by(|a, b| a.0.cmp(&b.0));
    cut.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    cut.into_iter()
        .filter_map(|(tree, energy_uj)| {
            let energy_uj = energy_uj.round() as u64;
            // A stack of one nameless frame (found by the `documents` fuzz target) is an empty
            // line to inferno, which then refuses the whole graph.
            let tree = if tree.is_empty() { UNNAMED } else { &tree };
            (energy_uj > 0).then(|| format!("{tree} {energy_uj}"))
        })
        .collect()
}

fn common_prefix(a: &PathGroup, b: &PathGroup) -> usize {
    a.frames.iter().zip(&b.frames).take_while(|(x, y)| x.short == y.short).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::aggregate::{path_groups, Scope};
    use crate::attribution::stacks::methods::StackRules;
    use crate::attribution::stacks::paths::PathStyle;
    use crate::attribution::stacks::thread_kind::ThreadKind;
    use crate::model::{Frame, FrameKind};

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };
    use crate::attribution::stacks::aggregate::StackTotal;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::safe_write::test_dir;
    use quick_xml::events::Event;
    use std::path::Path;
    use std::sync::Arc;

    fn run() -> Frame {
        java("java.lang.Thread.run")
    }

    fn compute() -> Frame {
        java("com.acme.App.compute")
    }

    fn total(frames: &[Frame], energy_uj: f64) -> StackTotal {
        StackTotal {
            carbon_g: 0.0,
            thread: ThreadKind::Application,
            stack: Arc::from(frames.to_vec()),
            energy_uj,
            samples: 1,
        }
    }

    #[test]
    fn frames_too_narrow_to_draw_are_cut_into_their_parent() {
        let stacks = vec![
            total(&[run(), compute(), java("java.math.BigInteger.multiply")], 1_000_000.0),
            // Two tiny leaves under compute: cut at compute and merged there.
            total(&[run(), compute(), java("java.util.A.tiny")], 10.0),
            total(&[run(), compute(), java("java.util.B.tiny")], 15.0),
            // A tiny subtree whose root frame is visible only as a sum.
            total(&[run(), java("com.acme.Other.f"), java("x.Y.z")], 30.0),
            total(&[run(), java("com.acme.Other.f"), java("x.Y.w")], 30.0),
        ];
        let lines = visible_lines(&path_groups(&stacks, Scope::All, JVM, PathStyle::Graph));
        assert_eq!(
            lines,
            [
                "java.lang.Thread.run_[j];com.acme.App.compute_[j] 25",
                "java.lang.Thread.run_[j];com.acme.App.compute_[j];java.math.BigInteger.multiply_[j] 1000000",
                "java.lang.Thread.run_[j];com.acme.Other.f_[j] 60",
            ]
        );
    }

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
        let stacks = vec![
            total(&[run(), compute(), java("java.math.BigInteger.multiply")], 9000.0),
            total(
                &[run(), compute(), frame("write", FrameKind::Native), frame("ksys_write", FrameKind::Kernel)],
                1000.0,
            ),
        ];
        let svg = render_svg("Energy", &path_groups(&stacks, Scope::All, JVM, PathStyle::Graph));
        write_bytes(&test_dir(tmp.path()), "f.svg", &svg.unwrap()).unwrap();
        let texts = svg_texts(&tmp.path().join("f.svg"));
        let hot = texts.iter().find(|t| t.starts_with("java.math.BigInteger.multiply")).expect("hot frame title");
        assert!(hot.contains("9,000 µJ"), "{hot}");
        assert!(texts.iter().any(|t| t.starts_with("ksys_write")), "kernel frame kept");
    }

    #[test]
    fn stacks_rooted_at_a_hash_frame_are_drawn() {
        // Found by the raw_profile fuzz target: every folded line started with `#`, inferno
        // read them all as comments and refused the input, so the run's results failed.
        let tmp = tempfile::tempdir().unwrap();
        let stacks = vec![total(&[frame("# nknown]", FrameKind::Native), compute()], 500.0)];
        // Every frame kept, so the graph is rooted at the `#` frame.
        let all_frames = StackRules { jvm: true, native_frames: true };
        let svg = render_svg("Energy", &path_groups(&stacks, Scope::All, all_frames, PathStyle::Graph)).unwrap();
        write_bytes(&test_dir(tmp.path()), "h.svg", &svg).unwrap();
        let texts = svg_texts(&tmp.path().join("h.svg"));
        assert!(texts.iter().any(|t| t.starts_with("_# nknown]")), "{texts:?}");
    }

    #[test]
    fn control_characters_in_the_title_and_frames_are_shown_as_text() {
        let tmp = tempfile::tempdir().unwrap();
        let stacks = vec![total(&[run(), frame("\x1b[31m<a&\"'>\u{1}", FrameKind::Native)], 500.0)];
        let all_frames = StackRules { jvm: true, native_frames: true };
        let groups = path_groups(&stacks, Scope::All, all_frames, PathStyle::Graph);
        let svg = render_svg("Energy of pid 7 (\x1b[31m<a&\"'>\u{FFFF})", &groups).unwrap();
        write_bytes(&test_dir(tmp.path()), "c.svg", &svg).unwrap();
        let texts = svg_texts(&tmp.path().join("c.svg"));
        assert!(texts.contains(&"Energy of pid 7 (\\x1b[31m<a&\"'>\\u{ffff})".to_owned()), "{texts:?}");
        assert!(texts.iter().any(|t| t.starts_with("\\x1b[31m<a&\"'>\\x01 (")), "{texts:?}");
    }

    #[test]
    fn stacks_of_nameless_frames_are_drawn() {
        for names in [&[""][..], &["", ""], &["", "x"]] {
            let frames: Vec<Frame> = names.iter().map(|n| frame(n, FrameKind::Native)).collect();
            let stacks = vec![total(&frames, 500.0)];
            let all_frames = StackRules { jvm: true, native_frames: true };
            let svg = render_svg("Energy", &path_groups(&stacks, Scope::All, all_frames, PathStyle::Graph));
            assert!(svg.is_ok(), "{names:?}: {svg:?}");
        }
    }

    #[test]
    fn frames_whose_control_characters_sort_elsewhere_once_shown_are_drawn() {
        let stacks = vec![
            total(&[frame("08\x1bbar", FrameKind::Native)], 500.0),
            total(&[frame("08\x1bbar", FrameKind::Native), frame("0", FrameKind::Native)], 500.0),
            total(&[frame("08a", FrameKind::Native)], 500.0),
        ];
        let all_frames = StackRules { jvm: true, native_frames: true };
        let svg = render_svg("Energy", &path_groups(&stacks, Scope::All, all_frames, PathStyle::Graph));
        assert!(svg.is_ok(), "{svg:?}");
    }

    #[test]
    fn empty_input_still_makes_an_svg() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("e.svg");
        write_bytes(&test_dir(tmp.path()), "e.svg", &render_svg("Energy", &[]).unwrap()).unwrap();
        assert!(svg_texts(&path).iter().any(|t| t.contains("no energy")));
    }
}
