//! `gen config <host>`: print a host's configuration for a built tree, or write a project.

use crate::cli::ConfigArgs;
use anyhow::Result;
use genapi::hosts::Host;

pub(crate) fn execute(args: ConfigArgs) -> Result<()> {
    if let Some(project) = &args.project {
        let Host::Edge(edge) = args.host.into() else {
            anyhow::bail!(
                "--project writes a Cloudflare Worker or a Deno project (`gen config cloudflare|deno --project DIR`); \
                 nginx and Caddy take the printed configuration: `gen config {} > FILE`",
                format!("{:?}", args.host).to_lowercase()
            );
        };
        let report = genapi::hosts::write_project(edge, &args.dir, args.max_age, project)?;
        super::emit(super::To::Stderr, 0, &project_text(&report, project), true);
        return Ok(());
    }
    let config = genapi::hosts::render_config(args.host.into(), &args.dir, &args.listen, args.max_age)?;
    super::emit(super::To::Stdout, 0, &config, false);
    Ok(())
}

/// What was written, what was kept, and how to run the project.
fn project_text(report: &genapi::hosts::ProjectReport, project: &std::path::Path) -> String {
    let mut text = format!("wrote {} in {}", report.written.join(", "), project.display());
    if !report.kept.is_empty() {
        text.push_str(&format!("; kept {} (your settings)", report.kept.join(", ")));
    }
    let steps: Vec<String> = report.run_locally.lines().map(|line| format!("  {line}")).collect();
    format!("{text}\nrun it on this machine:\n  cd {}\n{}", project.display(), steps.join("\n"))
}
