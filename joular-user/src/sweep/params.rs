//! The parameters swept (`--param n=1,2,4`, `--param-range n=1:20:1`), the settings they make
//! (one parameter at a time around the others' defaults, or the full grid) and the command
//! each setting runs (`{n}` replaced by the value).

/// Most values one parameter may take: beyond it a typo (`1:1e9:1`) is likelier than a plan.
pub const MAX_VALUES: usize = 10_000;

/// One value: as written (what the command gets) and as a number (what is fitted).
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub text: String,
    pub x: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    /// In the order given; the first is the default while another parameter is swept.
    pub values: Vec<Value>,
}

impl Param {
    pub fn placeholder(&self) -> String {
        format!("{{{}}}", self.name)
    }
}

/// One setting of every parameter, and which parameter it varies (`None`: a grid point).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub swept: Option<usize>,
    /// Per parameter (in `Param` order), the index of its value.
    pub values: Vec<usize>,
}

impl Point {
    /// `n=4` or `keylen=1024 n=4`: the progress line's and the table's.
    pub fn label(&self, params: &[Param]) -> String {
        self.pairs(params).collect::<Vec<_>>().join(" ")
    }

    /// `n=4` or `keylen=1024,n=4`: a directory name (names are identifiers, values numbers).
    pub fn slug(&self, params: &[Param]) -> String {
        self.pairs(params).collect::<Vec<_>>().join(",")
    }

    fn pairs<'a>(&'a self, params: &'a [Param]) -> impl Iterator<Item = String> + 'a {
        params.iter().zip(&self.values).map(|(p, &i)| format!("{}={}", p.name, p.values[i].text))
    }

    /// The command with each `{name}` replaced by this point's value.
    pub fn command(&self, params: &[Param], command: &[String]) -> Vec<String> {
        command
            .iter()
            .map(|arg| {
                params
                    .iter()
                    .zip(&self.values)
                    .fold(arg.clone(), |arg, (p, &i)| arg.replace(&p.placeholder(), &p.values[i].text))
            })
            .collect()
    }
}

const NAME_FIX: &str = "a name is a letter or `_`, then letters, digits or `_`";

fn split_name<'a>(flag: &str, text: &'a str, example: &str) -> Result<(&'a str, &'a str), String> {
    let (name, rest) =
        text.split_once('=').ok_or_else(|| format!("{flag} {text}: expected NAME=VALUES, e.g. {flag} {example}"))?;
    let mut chars = name.chars();
    let good_start = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !good_start || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("{flag} {text}: `{name}` is not a parameter name: {NAME_FIX}, e.g. {flag} {example}"));
    }
    Ok((name, rest))
}

fn number(flag: &str, text: &str, value: &str, example: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!(
            "{flag} {text}: `{value}` is not a number: models are fitted over numbers, e.g. {flag} {example}"
        )),
    }
}

/// `--param NAME=V1,V2,...`.
pub fn parse_list(text: &str) -> Result<Param, String> {
    const EXAMPLE: &str = "keylen=512,1024,2048";
    let (name, list) = split_name("--param", text, EXAMPLE)?;
    let mut values = Vec::new();
    for v in list.split(',') {
        let x = number("--param", text, v, EXAMPLE)?;
        if values.iter().any(|seen: &Value| seen.x == x) {
            return Err(format!("--param {text}: {v} is given twice: give each value once (--runs repeats them)"));
        }
        values.push(Value { text: v.trim().to_owned(), x });
    }
    if values.len() > MAX_VALUES {
        return Err(format!("--param {text}: more than {MAX_VALUES} values"));
    }
    Ok(Param { name: name.to_owned(), values })
}

/// `--param-range NAME=START:STOP:STEP`, STOP included when a step lands on it.
pub fn parse_range(text: &str) -> Result<Param, String> {
    const EXAMPLE: &str = "n=1:20:1";
    let flag = "--param-range";
    let (name, spec) = split_name(flag, text, EXAMPLE)?;
    let parts: Vec<&str> = spec.split(':').collect();
    let [start, stop, step] = parts[..] else {
        return Err(format!("{flag} {text}: expected NAME=START:STOP:STEP, e.g. {flag} {EXAMPLE}"));
    };
    let (lo, hi, by) =
        (number(flag, text, start, EXAMPLE)?, number(flag, text, stop, EXAMPLE)?, number(flag, text, step, EXAMPLE)?);
    if by <= 0.0 || hi < lo {
        return Err(format!("{flag} {text}: expected START ≤ STOP and a STEP above 0, e.g. {flag} {EXAMPLE}"));
    }
    // Counted, not accumulated, so 0.1 steps do not drift; a hair of slack keeps STOP.
    let count = ((hi - lo) / by * (1.0 + 1e-12) + 1e-9).floor() + 1.0;
    if count > MAX_VALUES as f64 {
        return Err(format!("{flag} {text}: {count} values, more than {MAX_VALUES}: take a larger STEP"));
    }
    let integral = [start, stop, step].iter().all(|s| s.trim().parse::<i64>().is_ok());
    let values = (0..count as usize)
        .map(|i| {
            let x = lo + i as f64 * by;
            let x = if integral { x.round() } else { (x * 1e9).round() / 1e9 };
            let text = if integral { format!("{}", x as i64) } else { format!("{x}") };
            Value { text, x }
        })
        .collect();
    Ok(Param { name: name.to_owned(), values })
}

/// Every parameter's name once, and each one's `{name}` somewhere in the command.
pub fn check(params: &[Param], command: &[String]) -> Result<(), String> {
    if params.is_empty() {
        return Err("sweep needs a parameter: --param NAME=V1,V2,... or --param-range NAME=START:STOP:STEP".into());
    }
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            return Err(format!("--param {}: given twice: give each parameter once", p.name));
        }
        let placeholder = p.placeholder();
        if !command.iter().any(|arg| arg.contains(&placeholder)) {
            return Err(format!(
                "--param {}: the command has no {placeholder}, so every value would run the same command: \
put {placeholder} where the value goes, e.g. -- java -cp app.jar Main {placeholder}",
                p.name
            ));
        }
    }
    Ok(())
}

/// The settings run: each parameter in turn over its values with the others at their default
/// (their first value), or with `grid` every combination.
pub fn plan(params: &[Param], grid: bool) -> Vec<Point> {
    let defaults = vec![0; params.len()];
    if grid || params.len() == 1 {
        let mut points = vec![defaults];
        for (i, p) in params.iter().enumerate() {
            points = points
                .into_iter()
                .flat_map(|base| {
                    (0..p.values.len()).map(move |v| {
                        let mut next = base.clone();
                        next[i] = v;
                        next
                    })
                })
                .collect();
        }
        let swept = if params.len() == 1 { Some(0) } else { None };
        return points.into_iter().map(|values| Point { swept, values }).collect();
    }
    let mut points = Vec::new();
    for (i, p) in params.iter().enumerate() {
        for v in 0..p.values.len() {
            let mut values = defaults.clone();
            values[i] = v;
            points.push(Point { swept: Some(i), values });
        }
    }
    points
}

/// The points of `param`'s series: those that vary it (with the others at their defaults).
pub fn along(points: &[Point], param: usize) -> impl Iterator<Item = usize> + '_ {
    points
        .iter()
        .enumerate()
        .filter(move |(_, pt)| match pt.swept {
            Some(s) => s == param,
            None => pt.values.iter().enumerate().all(|(j, &v)| j == param || v == 0),
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_and_ranges_parse_with_their_text_kept() {
        let p = parse_list("keylen=512, 1024,2048").unwrap();
        assert_eq!(p.name, "keylen");
        assert_eq!(
            p.values.iter().map(|v| (&*v.text, v.x)).collect::<Vec<_>>(),
            [("512", 512.0), ("1024", 1024.0), ("2048", 2048.0)]
        );
        let r = parse_range("n=1:20:1").unwrap();
        assert_eq!((r.values.len(), &*r.values[19].text), (20, "20"));
        let r = parse_range("load=0.1:0.5:0.1").unwrap();
        assert_eq!(r.values.iter().map(|v| &*v.text).collect::<Vec<_>>(), ["0.1", "0.2", "0.3", "0.4", "0.5"]);
        assert_eq!(parse_range("n=2:9:3").unwrap().values.iter().map(|v| v.x).collect::<Vec<_>>(), [2.0, 5.0, 8.0]);
    }

    #[test]
    fn malformed_params_name_the_flag_and_the_fix() {
        for (text, expect) in [
            ("keylen", "expected NAME=VALUES, e.g. --param keylen=512,1024,2048"),
            ("key len=1", "is not a parameter name"),
            ("k=1,big", "`big` is not a number"),
            ("k=1,,2", "`` is not a number"),
            ("k=1,2,1", "1 is given twice"),
        ] {
            let err = parse_list(text).unwrap_err();
            assert!(err.starts_with(&format!("--param {text}: ")) && err.contains(expect), "{text}: {err}");
        }
        for (text, expect) in [
            ("n=1:20", "expected NAME=START:STOP:STEP"),
            ("n=5:1:1", "a STEP above 0"),
            ("n=1:5:0", "a STEP above 0"),
            ("n=1:1e9:1", "more than 10000"),
            ("n=1:x:1", "`x` is not a number"),
        ] {
            let err = parse_range(text).unwrap_err();
            assert!(err.starts_with(&format!("--param-range {text}: ")) && err.contains(expect), "{text}: {err}");
        }
    }

    #[test]
    fn every_parameter_needs_its_placeholder_once() {
        let n = parse_list("n=1,2").unwrap();
        let k = parse_list("k=3,4").unwrap();
        assert!(check(std::slice::from_ref(&n), &cmd(&["app", "--size={n}"])).is_ok());
        let err = check(&[n.clone(), k], &cmd(&["app", "{n}"])).unwrap_err();
        assert!(err.starts_with("--param k: the command has no {k}"), "{err}");
        let err = check(&[n.clone(), n], &cmd(&["app", "{n}"])).unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        assert!(check(&[], &cmd(&["app"])).unwrap_err().contains("--param NAME="));
    }

    #[test]
    fn one_at_a_time_around_the_defaults_or_the_full_grid() {
        let params = [parse_list("a=1,2,3").unwrap(), parse_list("b=10,20").unwrap()];
        let points = plan(&params, false);
        let labels: Vec<_> = points.iter().map(|p| p.label(&params)).collect();
        assert_eq!(labels, ["a=1 b=10", "a=2 b=10", "a=3 b=10", "a=1 b=10", "a=1 b=20"]);
        assert_eq!(along(&points, 1).collect::<Vec<_>>(), [3, 4]);
        let grid = plan(&params, true);
        assert_eq!(grid.len(), 6);
        assert!(grid.iter().all(|p| p.swept.is_none()));
        let along_b: Vec<_> = along(&grid, 1).map(|i| grid[i].label(&params)).collect();
        assert_eq!(along_b, ["a=1 b=10", "a=1 b=20"]);
        let cmd = points[4].command(&params, &cmd(&["app", "-a{a}", "{b}{b}", "{c}"]));
        assert_eq!(cmd, ["app", "-a1", "2020", "{c}"]);
        assert_eq!(points[4].slug(&params), "a=1,b=20");
        let single = plan(&params[..1], true);
        assert!(single.iter().all(|p| p.swept == Some(0)));
    }
}
