//! `--nic-power IFACE=IDLE_W,W_PER_GBPS` and `--disk-power DEV=IDLE_W,ACTIVE_W`: a unit's name
//! and two figures in watts, checked as clap reads them (a bad value exits 2 naming the flag,
//! the value and the form it wants).

/// Above this a figure is a typo, not a device (a whole server draws less).
const MAX_DEVICE_W: f64 = 1000.0;

/// One override: the unit's name and its two figures (`a`, `b`: idle and per Gbit/s for a
/// NIC, idle and active for a disk).
#[derive(Debug, Clone, PartialEq)]
pub struct UnitFigures {
    pub name: String,
    pub a_w: f64,
    pub b_w: f64,
}

fn parse(text: &str, form: &str, example: &str, second: &str) -> Result<UnitFigures, String> {
    let fix = format!("write {form}, e.g. {example}");
    let (name, figures) = text.split_once('=').ok_or_else(|| format!("`{text}` has no `=`: {fix}"))?;
    let name = name.trim();
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(format!("`{name}` is not a device name: {fix}"));
    }
    let (a, b) = figures.split_once(',').ok_or_else(|| format!("`{figures}` is not two numbers: {fix}"))?;
    let number = |what: &str, s: &str| -> Result<f64, String> {
        let w: f64 = s.trim().parse().map_err(|_| format!("{what} `{s}` is not a number of watts: {fix}"))?;
        if !(w.is_finite() && (0.0..=MAX_DEVICE_W).contains(&w)) {
            return Err(format!("{what} {w} must be between 0 and {MAX_DEVICE_W} W: {fix}"));
        }
        Ok(w)
    };
    Ok(UnitFigures { name: name.to_owned(), a_w: number("idle power", a)?, b_w: number(second, b)? })
}

/// `--nic-power`'s value.
pub fn parse_nic_power(text: &str) -> Result<UnitFigures, String> {
    parse(text, "IFACE=IDLE_W,W_PER_GBPS", "eth0=0.7,0.35", "watts per Gbit/s")
}

/// `--disk-power`'s value.
pub fn parse_disk_power(text: &str) -> Result<UnitFigures, String> {
    parse(text, "DEV=IDLE_W,ACTIVE_W", "sda=0.4,3.0", "active power")
}

/// The same unit named twice is refused (which one was meant?).
pub fn check_unique(flag: &str, all: &[UnitFigures]) -> Result<(), String> {
    for (i, f) in all.iter().enumerate() {
        if all[..i].iter().any(|g| g.name == f.name) {
            return Err(format!("{flag} names {} twice: give each device once", f.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse_and_bad_values_say_the_form() {
        assert_eq!(parse_nic_power("eth0=0.7,0.35").unwrap(), UnitFigures { name: "eth0".into(), a_w: 0.7, b_w: 0.35 });
        assert_eq!(parse_disk_power(" loop3 = 1 , 2.5").unwrap().name, "loop3");
        for bad in ["eth0", "eth0=1", "=1,2", "eth0=x,1", "eth0=1,-1", "eth0=1,nan", "eth0=1,1e9", "../x=1,2"] {
            let e = parse_nic_power(bad).unwrap_err();
            assert!(e.contains("IFACE=IDLE_W,W_PER_GBPS"), "{bad}: {e}");
        }
        assert!(parse_disk_power("sda=1").unwrap_err().contains("DEV=IDLE_W,ACTIVE_W"));
        let twice = [parse_disk_power("sda=1,2").unwrap(), parse_disk_power("sda=1,3").unwrap()];
        assert!(check_unique("--disk-power", &twice).unwrap_err().contains("sda twice"));
        assert!(check_unique("--disk-power", &twice[..1]).is_ok());
    }
}
