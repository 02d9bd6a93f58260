use super::*;

/// Deterministic noise in [-1, 1] (an LCG): the tests must not pass or fail by chance.
fn noise(state: &mut u64) -> f64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// `runs` repeats of `f` at each x, with a relative noise of ±`rel`.
fn series(xs: &[f64], runs: usize, rel: f64, f: impl Fn(f64) -> f64) -> (Vec<f64>, Vec<f64>) {
    let mut state = 42;
    let (mut px, mut py) = (Vec::new(), Vec::new());
    for &x in xs {
        for _ in 0..runs {
            px.push(x);
            py.push(f(x) * (1.0 + rel * noise(&mut state)));
        }
    }
    (px, py)
}

fn range(lo: u32, hi: u32) -> Vec<f64> {
    (lo..=hi).map(f64::from).collect()
}

#[test]
fn each_family_is_recovered_from_noisy_repeats() {
    let xs = range(1, 12);
    let cases: [(Family, &dyn Fn(f64) -> f64); 8] = [
        (Family::Constant, &|_| 4.0),
        (Family::Logarithmic, &|x: f64| 1.0 + 3.0 * x.ln()),
        (Family::Linear, &|x| 0.5 + 2.0 * x),
        (Family::NLogN, &|x: f64| 0.5 + 2.0 * x * x.ln()),
        (Family::Quadratic, &|x| 1.0 + 0.5 * x * x),
        (Family::Cubic, &|x| 2.0 + 0.01 * x * x * x),
        (Family::PowerLaw, &|x: f64| 3.0 * x.powf(2.5)),
        (Family::Exponential, &|x: f64| 0.2 * 1.8f64.powf(x)),
    ];
    for (family, f) in cases {
        let (px, py) = series(&xs, 3, 0.03, f);
        let choice = choose(&px, &py).unwrap();
        assert_eq!(choice.best.family, family, "{family:?} data: {choice:#?}");
        assert!(choice.best.r2 > 0.9 || family == Family::Constant, "{family:?}: {:?}", choice.best);
        let runner = choice.runner_up.unwrap();
        assert!(runner.family != family && runner.aicc >= choice.best.aicc - FREE_SHAPE_MARGIN, "{choice:#?}");
    }
}

#[test]
fn coefficients_are_those_of_the_curve() {
    let xs = range(2, 14);
    let (px, py) = series(&xs, 5, 0.01, |x| 0.2 * 2f64.powf(x));
    let e = fit(Family::Exponential, &px, &py).unwrap();
    assert!((e.b - 2.0).abs() < 0.01 && (e.a - 0.2).abs() < 0.01, "{e:?}");
    assert!((e.predict(10.0) - 204.8).abs() < 5.0, "{e:?}");
    let (px, py) = series(&range(1, 10), 3, 0.0, |x| 3.0 * x.powf(1.5));
    let p = fit(Family::PowerLaw, &px, &py).unwrap();
    assert!((p.b - 1.5).abs() < 1e-6 && (p.a - 3.0).abs() < 1e-5 && p.r2 > 0.999_999, "{p:?}");
    let (px, py) = series(&range(1, 10), 3, 0.0, |x| 7.0 - 0.5 * x);
    let l = fit(Family::Linear, &px, &py).unwrap();
    assert!((l.a - 7.0).abs() < 1e-9 && (l.b + 0.5).abs() < 1e-9, "{l:?}");
    assert_eq!(l.equation(), "7.0000 + -0.5000·x");
    assert_eq!(fit(Family::Quadratic, &px, &py).unwrap().equation().split_once('·').unwrap().1, "x²");
}

#[test]
fn constant_energy_is_constant_even_when_exact() {
    let xs = range(1, 8);
    let (px, py) = series(&xs, 3, 0.0, |_| 2.5);
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.best.family, Family::Constant, "{c:#?}");
    assert_eq!((c.best.a, c.best.r2), (2.5, 1.0));
    assert!(c.best.aicc.is_finite());
    let (px, py) = series(&xs, 3, 0.05, |_| 2.5);
    assert_eq!(choose(&px, &py).unwrap().best.family, Family::Constant);
}

#[test]
fn families_with_more_coefficients_than_the_points_bear_are_skipped() {
    // AICc needs n > k + 1, k counting the residuals' variance: 3 points fit nothing, 4 only
    // the constant, 5 every family.
    let (px, py) = series(&range(1, 3), 1, 0.0, |x| x);
    assert_eq!(choose(&px, &py), None);
    let (px, py) = series(&range(1, 4), 1, 0.0, |x| x);
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.fits.iter().map(|f| f.family).collect::<Vec<_>>(), [Family::Constant]);
    assert_eq!(c.runner_up, None);
    let (px, py) = series(&range(1, 5), 1, 0.0, |x| x);
    assert_eq!(choose(&px, &py).unwrap().fits.len(), 8);
    // Repeats at one x say nothing about a slope.
    let (px, py) = series(&[3.0], 6, 0.1, |x| x);
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.fits.iter().map(|f| f.family).collect::<Vec<_>>(), [Family::Constant]);
    assert_eq!(choose(&[], &[]), None);
}

#[test]
fn logarithms_of_x_are_skipped_where_x_is_not_positive() {
    let (px, py) = series(&range(0, 10), 3, 0.02, |x| 1.0 + 2.0 * x);
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.best.family, Family::Linear);
    let families: Vec<_> = c.fits.iter().map(|f| f.family).collect();
    for skipped in [Family::Logarithmic, Family::NLogN, Family::PowerLaw] {
        assert!(!families.contains(&skipped), "{skipped:?} fitted with x = 0: {families:?}");
    }
    assert!(families.contains(&Family::Exponential));
    assert_eq!(fit(Family::Linear, &[1.0, f64::NAN, 2.0, 3.0, 4.0], &[1.0; 5]), None);
}

#[test]
fn zeros_where_a_method_was_too_cheap_to_be_sampled_still_fit_an_exponential() {
    // 2^x: at the two smallest values the method took no sample (0 J), which a fit in log space
    // would have to drop.
    let (px, mut py) = series(&range(1, 12), 3, 0.03, |x| 0.01 * 2f64.powf(x));
    for (x, y) in px.iter().zip(py.iter_mut()) {
        if *x <= 2.0 {
            *y = 0.0;
        }
    }
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.best.family, Family::Exponential, "{c:#?}");
    assert!((c.best.b - 2.0).abs() < 0.05, "{:?}", c.best);
}

#[test]
fn a_power_law_close_to_a_line_is_reported_as_the_line() {
    let (px, py) = series(&range(1, 12), 3, 0.05, |x| 0.1 + 2.0 * x);
    let c = choose(&px, &py).unwrap();
    assert_eq!(c.best.family, Family::Linear, "{c:#?}");
}
