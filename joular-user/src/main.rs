//! `joular-ebpf`: parses the command line and hands over to the session or a subcommand.

mod cli;
mod session;

use clap::Parser;
use cli::args::{Cli, Command};
use session::target::{self, Target};

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("joular-ebpf: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let (target, common) = match cli.command {
        Some(Command::Report(args)) => {
            joular_user::output::report(&args)?;
            return Ok(0);
        }
        Some(Command::Serve(serve)) => {
            serve.common.validate().map_err(anyhow::Error::msg)?;
            let fleet = session::FleetOptions {
                listen: serve.listen,
                top_methods: serve.top_methods,
                retain_exited: std::time::Duration::from_secs(serve.retain_exited),
            };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            return rt.block_on(session::run(Target::All, &serve.common, Some(fleet)));
        }
        Some(Command::Record(r)) => {
            r.common.validate().map_err(anyhow::Error::msg)?;
            (Target::Command(target::GatedChild::spawn(&r.command)?), r.common)
        }
        None => {
            let p = cli.profile;
            p.common.validate().map_err(anyhow::Error::msg)?;
            let target = if p.all {
                Target::All
            } else if !p.pid.is_empty() {
                target::check_pids(&p.pid, &p.common.proc_root)?;
                Target::Pids(p.pid)
            } else {
                anyhow::bail!("nothing to profile: give --pid PID, --all, or `record -- CMD` (see --help)");
            };
            (target, p.common)
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(session::run(target, &common, None))
}
