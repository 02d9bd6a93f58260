//! The read loop every measured source shares: one package counter per socket, a DRAM counter
//! beside it when asked for, and one platform (psys) counter for the whole machine. powercap,
//! the perf PMU and the MSRs differ only in how one counter is opened and read (a sysfs file,
//! a perf descriptor, a register), so that is all they implement ([`DomainCounter`]); each
//! source is [`Domains`] over its counter type. These types are `pub` only because the
//! sources' names are; `energy` keeps this module private.

use super::error::EnergyError;
use super::wrap::WrappingCounter;
use super::{CycleUtilisation, EnergySource, SocketEnergy, SourceKind};

/// The raw value of one RAPL domain's counter (a socket's package or DRAM, or psys), in the
/// counter's own unit. A read that fails names what it read.
pub trait DomainCounter: Send {
    /// The source whose counters these are.
    const KIND: SourceKind;

    fn read_count(&mut self) -> Result<u64, EnergyError>;
}

/// One domain's counter with its wrap state and the factor turning its counts into µJ.
#[derive(Debug)]
pub struct Domain<C> {
    counter: C,
    wrap: WrappingCounter,
    uj_per_count: f64,
}

impl<C: DomainCounter> Domain<C> {
    /// Reads the baseline now, so the first delta covers the first cycle only. `range` is
    /// where the counter wraps to 0 (`None`: it never wraps).
    pub(crate) fn open(mut counter: C, range: Option<u64>, uj_per_count: f64) -> Result<Self, EnergyError> {
        let first = counter.read_count()?;
        Ok(Self::from_baseline(counter, first, range, uj_per_count))
    }

    /// For a source that reads the baseline itself (to report its failure its own way).
    pub(crate) fn from_baseline(counter: C, first: u64, range: Option<u64>, uj_per_count: f64) -> Self {
        Self { counter, wrap: WrappingCounter::new(first, range), uj_per_count }
    }

    /// Energy since the previous read in µJ, and whether the counter misbehaved.
    fn delta_uj(&mut self) -> Result<(f64, bool), EnergyError> {
        let delta = self.wrap.update(self.counter.read_count()?);
        Ok((delta.delta as f64 * self.uj_per_count, delta.flagged))
    }
}

/// The domains read for one socket; DRAM is absent unless `--dram` asked for it.
#[derive(Debug)]
pub struct SocketDomains<C> {
    pub(crate) socket: u32,
    pub(crate) package: Domain<C>,
    pub(crate) dram: Option<Domain<C>>,
}

/// Every domain a measured source reads, sockets in ascending order: with its counter type,
/// the source itself (`PowercapSource` is `Domains<ZoneFile>`).
#[derive(Debug)]
pub struct Domains<C> {
    sockets: Vec<SocketDomains<C>>,
    /// The platform counter covers the whole machine: reported on the lowest socket only.
    psys: Option<Domain<C>>,
}

impl<C: DomainCounter> Domains<C> {
    pub(crate) fn new(sockets: Vec<SocketDomains<C>>, psys: Option<Domain<C>>) -> Self {
        Self { sockets, psys }
    }

    /// Energy per socket since the previous read. A read error ends the cycle's read (the
    /// counters already read keep their new baseline, so the next read covers only its cycle).
    fn read_sockets(&mut self) -> Result<Vec<SocketEnergy>, EnergyError> {
        let mut out = Vec::with_capacity(self.sockets.len());
        for domains in &mut self.sockets {
            let (package_uj, mut flagged) = domains.package.delta_uj()?;
            let dram_uj = match &mut domains.dram {
                Some(dram) => {
                    let (uj, dram_flagged) = dram.delta_uj()?;
                    flagged |= dram_flagged;
                    Some(uj)
                }
                None => None,
            };
            out.push(socket_energy(domains.socket, package_uj, dram_uj, flagged));
        }
        if let (Some(psys), Some(first)) = (&mut self.psys, out.first_mut()) {
            let (uj, flagged) = psys.delta_uj()?;
            first.psys_energy_uj = Some(if flagged { 0.0 } else { uj });
        }
        Ok(out)
    }
}

impl<C: DomainCounter> EnergySource for Domains<C> {
    fn kind(&self) -> SourceKind {
        C::KIND
    }

    fn estimated(&self) -> bool {
        false
    }

    fn read(&mut self, _util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError> {
        self.read_sockets()
    }
}

/// One socket's reading; a flagged counter zeroes the whole socket for the cycle, so a
/// package/DRAM pair never mixes a good and a bad read.
fn socket_energy(socket: u32, package_uj: f64, dram_uj: Option<f64>, flagged: bool) -> SocketEnergy {
    let keep = |uj: f64| if flagged { 0.0 } else { uj };
    SocketEnergy {
        socket,
        energy_uj: keep(package_uj + dram_uj.unwrap_or(0.0)),
        dram_energy_uj: dram_uj.map(keep),
        psys_energy_uj: None,
        flagged,
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::energy::error::read_error;

    /// A counter whose next value (or failure) the test sets; `None` fails the read.
    #[derive(Debug, Clone, Default)]
    struct Fake(Arc<Mutex<Option<u64>>>);

    impl Fake {
        fn at(value: u64) -> Self {
            Self(Arc::new(Mutex::new(Some(value))))
        }

        fn set(&self, value: Option<u64>) {
            *self.0.lock().unwrap() = value;
        }
    }

    impl DomainCounter for Fake {
        const KIND: SourceKind = SourceKind::Powercap;

        fn read_count(&mut self) -> Result<u64, EnergyError> {
            let value = *self.0.lock().unwrap();
            value.ok_or_else(|| read_error("fake counter", io::Error::from_raw_os_error(libc::EIO), ""))
        }
    }

    fn domain(counter: &Fake, range: Option<u64>, uj_per_count: f64) -> Domain<Fake> {
        Domain::open(counter.clone(), range, uj_per_count).unwrap()
    }

    #[test]
    fn package_and_dram_make_e_s_and_psys_goes_to_the_lowest_socket_only() {
        let (p0, d0, p1, psys) = (Fake::at(0), Fake::at(0), Fake::at(0), Fake::at(0));
        let mut domains = Domains::new(
            vec![
                SocketDomains { socket: 0, package: domain(&p0, None, 2.0), dram: Some(domain(&d0, None, 2.0)) },
                SocketDomains { socket: 1, package: domain(&p1, None, 2.0), dram: None },
            ],
            Some(domain(&psys, None, 1.0)),
        );
        p0.set(Some(100));
        d0.set(Some(25));
        p1.set(Some(40));
        psys.set(Some(1_000));
        let read = domains.read_sockets().unwrap();
        assert_eq!(
            read,
            vec![
                SocketEnergy {
                    socket: 0,
                    energy_uj: 250.0,
                    dram_energy_uj: Some(50.0),
                    psys_energy_uj: Some(1_000.0),
                    flagged: false,
                },
                SocketEnergy { socket: 1, energy_uj: 80.0, ..Default::default() },
            ]
        );
    }

    #[test]
    fn a_wrap_mid_run_counts_both_sides_of_it() {
        let package = Fake::at(90);
        let mut domains = Domains::new(
            vec![SocketDomains { socket: 0, package: domain(&package, Some(100), 1.0), dram: None }],
            None,
        );
        let mut seen = Vec::new();
        for now in [95, 5, 25] {
            package.set(Some(now));
            seen.push(domains.read_sockets().unwrap()[0].energy_uj);
        }
        assert_eq!(seen, vec![5.0, 10.0, 20.0]);
    }

    #[test]
    fn a_flagged_dram_zeroes_its_whole_socket_and_a_flagged_psys_only_itself() {
        let (package, dram, psys) = (Fake::at(0), Fake::at(500), Fake::at(500));
        let mut domains = Domains::new(
            vec![SocketDomains {
                socket: 0,
                package: domain(&package, None, 1.0),
                dram: Some(domain(&dram, None, 1.0)),
            }],
            Some(domain(&psys, None, 1.0)),
        );
        package.set(Some(300));
        dram.set(Some(100));
        psys.set(Some(10));
        let read = domains.read_sockets().unwrap()[0];
        assert_eq!(
            read,
            SocketEnergy {
                socket: 0,
                energy_uj: 0.0,
                dram_energy_uj: Some(0.0),
                psys_energy_uj: Some(0.0),
                flagged: true,
            }
        );
        // Counting goes on from the new values.
        package.set(Some(310));
        dram.set(Some(104));
        psys.set(Some(11));
        let read = domains.read_sockets().unwrap()[0];
        assert_eq!((read.energy_uj, read.psys_energy_uj, read.flagged), (14.0, Some(1.0), false));
    }

    #[test]
    fn a_failed_read_is_an_error_at_open_and_at_read() {
        let broken = Fake::default();
        let err = Domain::open(broken.clone(), None, 1.0).unwrap_err();
        assert!(err.to_string().contains("fake counter"), "{err}");
        let package = Fake::at(0);
        let mut domains =
            Domains::new(vec![SocketDomains { socket: 0, package: domain(&package, None, 1.0), dram: None }], None);
        package.set(None);
        assert!(domains.read_sockets().unwrap_err().to_string().contains("fake counter"));
    }
}
