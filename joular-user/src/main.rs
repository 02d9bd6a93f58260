//! `joular-ebpf`: parses the command line and hands over to the session or a subcommand.

#[macro_use]
mod cli;
mod rlimit;
mod session;

use clap::Parser;
use cli::args::{Cli, Command};
use cli::errors::{exit_code, one_line, UsageError};
use session::target::{self, Target};

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        // Log lines carry target-controlled text (paths, names, replies): escaped as on stdout.
        .format(|buf, record| {
            use std::io::Write as _;
            let text = record.args().to_string();
            writeln!(
                buf,
                "[{} {:<5} {}] {}",
                buf.timestamp(),
                record.level(),
                record.target(),
                cli::term::terminal_safe(&text)
            )
        })
        .init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            errln!("joular-ebpf: error: {}", one_line(&e));
            exit_code(&e)
        }
    };
    // Attaches still waiting for a JVM are not joined: their trigger files go now.
    jvm_symbols::attach::remove_trigger_files();
    std::process::exit(code);
}

fn profile_options(
    args: &cli::args::ProfileExportArgs,
    common: &cli::args::CommonArgs,
) -> Option<session::profiles::ProfileOptions> {
    let dir = args.profile_dir.clone()?;
    let mut formats = Vec::new();
    for f in args.profile_format.iter().map(|f| f.format()) {
        if !formats.contains(&f) {
            formats.push(f);
        }
    }
    Some(session::profiles::ProfileOptions {
        dir,
        modes: common.modes(),
        interval_s: args.profile_interval,
        formats,
        retention: joular_user::fleet::Retention {
            keep_intervals: args.profile_keep,
            max_bytes: args.profile_max_mb << 20,
        },
        host: args
            .host_name
            .clone()
            .or_else(|| joular_user::fleet::rotate::hostname(&common.proc_root))
            .unwrap_or_else(|| "unknown".into()),
        native_frames: common.native_frames,
    })
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let (target, common) = match cli.command {
        Some(Command::Report(args)) => return cli::report::run(&args),
        Some(Command::Diff(args)) => return cli::diff::run(&args),
        Some(Command::Sweep(args)) => return cli::sweep::run(&args),
        Some(Command::Calmness(args)) => return cli::calmness::run(&args),
        Some(Command::Serve(serve)) => {
            serve.validate().map_err(UsageError)?;
            let fleet = session::FleetOptions {
                listen: serve.listen,
                top_methods: serve.top_methods,
                retain_exited: std::time::Duration::from_secs(serve.retain_exited),
                results: serve.results,
                profiles: profile_options(&serve.profiles, &serve.common),
                vm_energy: serve.vm_energy_dir.clone().map(|dir| (dir, serve.vm_energy_range_uj)),
            };
            rlimit::raise_open_files_limit();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            return rt.block_on(session::run(Target::All, &serve.common, Some(fleet)));
        }
        Some(Command::Record(r)) => {
            r.common.validate().map_err(UsageError)?;
            (Target::Command(target::GatedChild::spawn(&r.command)?), r.common)
        }
        None => {
            let p = cli.profile;
            p.validate().map_err(UsageError)?;
            let target = if p.all {
                Target::All
            } else if !p.pid.is_empty() {
                let resolved = target::resolve_pids(&p.pid, &p.common.proc_root)?;
                for note in &resolved.notes {
                    errln!("joular-ebpf: note: {note}");
                }
                Target::Pids { pids: resolved.pids, starts: resolved.starts, follow_children: p.follow_children }
            } else {
                return Err(UsageError(
                    "nothing to profile: give --pid PID, --all, or `record -- CMD` (see --help)".into(),
                )
                .into());
            };
            (target, p.common)
        }
    };
    // After `record` has forked its command, which keeps the limit it was given.
    rlimit::raise_open_files_limit();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(session::run(target, &common, None))
}
