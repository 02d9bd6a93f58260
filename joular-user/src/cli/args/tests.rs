use super::*;

fn validate(args: &[&str]) -> Result<(), String> {
    let cli =
        Cli::try_parse_from(std::iter::once("joular-ebpf").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    cli.profile.common.validate()
}

#[test]
fn durations_and_intervals_are_bounded_and_name_their_flag() {
    assert!(validate(&["--pid", "1", "--duration", "2592000", "--interval", "3600"]).is_ok());
    for (args, flag) in [
        (&["--duration", "1e20"][..], "--duration"),
        (&["--duration", "NaN"], "--duration"),
        (&["--duration", "0"], "--duration"),
        (&["--duration=-1"], "--duration"),
        (&["--interval", "1e19"], "--interval"),
        (&["--interval", "inf"], "--interval"),
        (&["--interval", "3600.5"], "--interval"),
    ] {
        let err = validate(args).unwrap_err();
        assert!(err.starts_with(flag), "{args:?}: {err}");
    }
}

#[test]
fn the_symbol_budget_is_bounded() {
    assert!(validate(&["--max-symbol-mb", "8"]).is_ok());
    assert!(validate(&["--max-symbol-mb", "1048576"]).is_ok());
    for bad in ["0", "7", "1048577"] {
        let err = validate(&["--max-symbol-mb", bad]).unwrap_err();
        assert_eq!(err, format!("--max-symbol-mb must be between 8 and 1048576 MB (got {bad})"));
    }
}

#[test]
fn output_must_be_a_directory() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let err = validate(&["--output", file.path().to_str().unwrap()]).unwrap_err();
    assert!(err.starts_with("--output") && err.contains("not a directory"), "{err}");
    let below = file.path().join("results");
    let err = validate(&["--output", below.to_str().unwrap()]).unwrap_err();
    assert_eq!(err, format!("--output {}: {} is not a directory", below.display(), file.path().display()));
    assert!(validate(&["--output", "joularjx-result"]).is_ok());
}

#[test]
fn output_mode_is_octal_and_refused_with_its_flag() {
    let cli = Cli::try_parse_from(["joular-ebpf", "--pid", "1", "--output-mode", "0644"]).unwrap();
    assert_eq!(cli.profile.common.output_mode, Some(0o644));
    assert_eq!(cli.profile.common.modes(), Modes::exact(0o644));
    let err = Cli::try_parse_from(["joular-ebpf", "--pid", "1", "--output-mode", "4755"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--output-mode") && err.to_string().contains("beyond 0777"), "{err}");
    let cli = Cli::try_parse_from(["joular-ebpf", "report", "r", "--output-mode", "640"]).unwrap();
    assert!(matches!(cli.command, Some(Command::Report(ReportArgs { output_mode: Some(0o640), .. }))));
}

#[test]
fn json_needs_an_existing_directory_and_a_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/cycles.jsonl");
    let err = validate(&["--json", missing.to_str().unwrap()]).unwrap_err();
    assert!(err.starts_with("--json") && err.contains("does not exist"), "{err}");
    let err = validate(&["--json", dir.path().to_str().unwrap()]).unwrap_err();
    assert!(err.contains("is a directory"), "{err}");
    assert!(validate(&["--json", dir.path().join("c.jsonl").to_str().unwrap()]).is_ok());
}

#[test]
fn report_checks_where_it_writes() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let args = |extra: &[&str]| match Cli::try_parse_from(
        ["joular-ebpf", "report"].iter().copied().chain(extra.iter().copied()),
    )
    .unwrap()
    .command
    {
        Some(Command::Report(r)) => r,
        other => panic!("{other:?}"),
    };
    let f = file.path().to_str().unwrap();
    let err = validate_report(&args(&[f, "--format", "svg"])).unwrap_err();
    assert!(err.starts_with(&format!("report {f}: no such directory: pass a result directory")), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let below = file.path().join("x");
    let err = validate_report(&args(&[d, "--output", below.to_str().unwrap()])).unwrap_err();
    assert!(err.starts_with("--output"), "{err}");
    let err = validate_report(&args(&[d, "--output", "/proc/sys/kernel"])).unwrap_err();
    assert!(err.starts_with("--output /proc/sys/kernel: ") && err.contains("the kernel's"), "{err}");
    let err = validate_report(&args(&["/nonexistent", "--format", "table"])).unwrap_err();
    assert!(err.starts_with("report /nonexistent: no such directory"), "{err}");
    assert!(validate_report(&args(&[d, "--format", "table"])).is_ok(), "a table writes nothing");
}

#[test]
fn energy_flags_are_in_range_and_used_by_the_source() {
    assert!(validate(&["--tdp", "120", "--idle-power", "20"]).is_ok());
    assert!(validate(&["--tdp", "120", "--energy-source", "model"]).is_ok());
    for (args, start) in [
        (&["--tdp", "0"][..], "--tdp must be above 0 and at most 10000 W per socket (got 0)"),
        (&["--tdp", "NaN"], "--tdp must be"),
        (&["--tdp", "1e9"], "--tdp must be"),
        (&["--tdp=-5"], "--tdp must be"),
        (&["--idle-power=-1"], "--idle-power must be between 0"),
        (&["--idle-power", "inf"], "--idle-power must be"),
        (&["--tdp", "50", "--idle-power", "60"], "--idle-power 60 W must be below --tdp 50 W"),
        (
            &["--tdp", "120", "--energy-source", "powercap"],
            "--tdp only sets the model's power, and --energy-source powercap",
        ),
        (&["--sysfs-root", "/nonexistent"], "--sysfs-root /nonexistent: no such directory"),
        (&["--dev-root", "/nonexistent"], "--dev-root /nonexistent: no such directory"),
        (&["--proc-root", "/nonexistent"], "--proc-root /nonexistent: no such directory"),
    ] {
        let err = validate(args).unwrap_err();
        assert!(err.starts_with(start), "{args:?}: {err}");
    }
}

#[test]
fn cycles_are_at_least_a_tenth_of_a_second() {
    assert!(validate(&["--interval", "0.1"]).is_ok());
    let err = validate(&["--interval", "0.001"]).unwrap_err();
    assert!(err.starts_with("--interval must be at least 0.1 s (got 0.001)"), "{err}");
}

#[test]
fn results_and_json_are_refused_on_kernel_filesystems() {
    for (flag, path) in
        [("--output", "/proc/sys/kernel"), ("--output", "/sys/kernel"), ("--json", "/proc/sys/kernel/x.jsonl")]
    {
        let err = validate(&[flag, path]).unwrap_err();
        assert!(err.starts_with(&format!("{flag} {path}: ")) && err.contains("the kernel's"), "{err}");
    }
}

fn serve(args: &[&str]) -> Result<(), String> {
    match Cli::try_parse_from(["joular-ebpf", "serve"].iter().chain(args)).map_err(|e| e.to_string())?.command {
        Some(Command::Serve(s)) => s.validate(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn serve_flags_are_bounded_and_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("p");
    let profiles = profiles.to_str().unwrap();
    assert!(serve(&["--profile-dir", profiles, "--profile-interval", "10"]).is_ok());
    for (args, start) in [
        (&["--top-methods", "1000000"][..], "--top-methods must be at most 1000"),
        (&["--retain-exited", "99999999999"], "--retain-exited must be at most"),
        (
            &["--profile-dir", profiles, "--profile-interval", "0.5"],
            "--profile-interval 0.5 is shorter than one cycle (--interval 1)",
        ),
        (
            &["--profile-dir", profiles, "--profile-max-mb", "18446744073709551615"],
            "--profile-max-mb must be between 1 and 1048576 MB",
        ),
        (&["--profile-dir", "/proc/sys/kernel"], "--profile-dir /proc/sys/kernel: "),
        (&["--results", "--output", "/sys/kernel"], "--output /sys/kernel: "),
    ] {
        let err = serve(args).unwrap_err();
        assert!(err.starts_with(start), "{args:?}: {err}");
    }
    assert!(serve(&["--output", "/sys/kernel"]).is_ok(), "serve writes no tree without --results");
}

#[test]
fn follow_children_needs_pid() {
    assert!(Cli::try_parse_from(["joular-ebpf", "--follow-children"]).is_err());
    let cli = Cli::try_parse_from(["joular-ebpf", "--all", "--follow-children"]).unwrap();
    assert!(cli.profile.validate().unwrap_err().starts_with("--follow-children needs --pid"));
    let cli = Cli::try_parse_from(["joular-ebpf", "--pid", "4", "--follow-children"]).unwrap();
    assert!(cli.profile.follow_children);
}

#[test]
fn vm_energy_flags_name_the_flag_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let watts = dir.path().join("power_w");
    std::fs::write(&watts, "10\n").unwrap();
    let watts_arg = format!("vm-power-file:{}", watts.display());
    assert!(validate(&["--powercap-root", &root]).is_ok());
    assert!(validate(&["--energy-source", "powercap", "--powercap-root", &root]).is_ok());
    assert!(validate(&["--energy-source", &watts_arg]).is_ok());
    let cli = Cli::try_parse_from(["joular-ebpf", "--energy-source", &watts_arg]).unwrap();
    let opts = cli.profile.common.energy_options();
    assert_eq!((opts.source, opts.vm_power_file.as_deref()), (Some(SourceKind::VmPowerFile), Some(watts.as_path())));
    assert!(opts.measures_whole_vm());
    let cli = Cli::try_parse_from(["joular-ebpf", "--powercap-root", &root]).unwrap();
    let opts = cli.profile.common.energy_options();
    assert_eq!(opts.source, Some(SourceKind::Powercap));
    assert!(opts.measures_whole_vm());
    for (args, start) in [
        (
            &["--powercap-root", "/nonexistent"][..],
            "--powercap-root /nonexistent: no such directory: mount the host's export",
        ),
        (&["--energy-source", "msr", "--powercap-root", &root], "--powercap-root is read by the powercap source"),
        (
            &["--energy-source", "vm-power-file:/nonexistent/power_w"],
            "--energy-source vm-power-file:/nonexistent/power_w: no such file",
        ),
        (&["--energy-source", &watts_arg, "--dram"], "--dram: the host measures the VM as a whole"),
        (&["--powercap-root", &root, "--psys"], "--psys: the host measures the VM as a whole"),
        (
            &["--energy-source", &watts_arg, "--tdp", "50"],
            "--tdp only sets the model's power, and --energy-source vm-power-file",
        ),
    ] {
        let err = validate(args).unwrap_err();
        assert!(err.starts_with(start), "{args:?}: {err}");
    }
    for (arg, part) in [
        ("vm-power-file:", "needs the watts file's path"),
        ("vm-power-file", "after a colon"),
        ("rapl", "not a source"),
    ] {
        let err = validate(&["--energy-source", arg]).unwrap_err();
        assert!(err.contains("--energy-source") && err.contains(part), "{arg}: {err}");
    }
}

#[test]
fn device_model_overrides_repeat_and_bad_ones_name_the_flag_the_value_and_the_fix() {
    let sysfs = tempfile::tempdir().unwrap();
    for dir in ["class/net/eth0", "class/net/eth1", "block/loop3"] {
        std::fs::create_dir_all(sysfs.path().join(dir)).unwrap();
    }
    let root = sysfs.path().to_str().unwrap();
    let ok = [
        "--sysfs-root",
        root,
        "--devices",
        "cpu,network,disk",
        "--nic-power",
        "eth0=1,0.5",
        "--nic-power",
        "eth1=0.2,0.1",
        "--disk-power",
        "loop3=1,3",
    ];
    let cli = Cli::try_parse_from(std::iter::once("joular-ebpf").chain(ok)).unwrap();
    let models = cli.profile.common.device_models();
    assert_eq!(models.nic_power.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["eth0", "eth1"]);
    assert_eq!((models.disk_power[0].a_w, models.disk_power[0].b_w), (1.0, 3.0));
    assert!(validate(&ok).is_ok());
    for (args, says) in [
        (&["--devices", "network", "--nic-power", "eth0=1"][..], "invalid value 'eth0=1' for '--nic-power"),
        (&["--devices", "disk", "--disk-power", "loop3=a,1"], "DEV=IDLE_W,ACTIVE_W"),
        (&["--devices", "network", "--nic-power", "eth9=1,1"], "--nic-power eth9: no such device"),
        (&["--devices", "network", "--nic-power", "eth0=1,1", "--nic-power", "eth0=2,2"], "eth0 twice"),
        (&["--disk-power", "loop3=1,1"], "add disk to --devices"),
    ] {
        let mut argv = vec!["--sysfs-root", root];
        argv.extend_from_slice(args);
        let err = validate(&argv).unwrap_err();
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
