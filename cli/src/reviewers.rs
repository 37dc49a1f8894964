//! `portcullis reviewers`: reviewers who decide in the console with a passkey. The operator
//! invites a reviewer with the roles the keyring will give them; the reviewer opens the link
//! and enrols a passkey in the console; the operator confirms the enrolment into the keyring
//! file the workers load, once the fingerprint the reviewer reads from the console matches.
//! Until then the passkey decides nothing: the keyring is the operator's, never the console's.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use portcullis_core::{Keyring, Reviewer};
use portcullis_stores::{Invite, Store};

use crate::table::{self, now_ms, printable, remaining};
use crate::{CliError, store};

/// The operator's commands on reviewers.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Invite a reviewer to enrol a passkey in the console: prints the one-time link to send
    /// them (by a channel you trust; whoever holds it can enrol).
    Invite {
        /// The reviewer's id, as decisions and the audit name them.
        id: String,
        /// A role the reviewer will decide with (repeat it).
        #[arg(long = "role", value_name = "ROLE", required = true)]
        roles: Vec<String>,
        /// The tenant whose tickets alone the reviewer will decide.
        #[arg(long)]
        tenant: Option<String>,
        /// The console's address, as reviewers open it: the link starts with it.
        #[arg(long, value_name = "URL", env = "PORTCULLIS_CONSOLE_URL")]
        console: String,
        /// How many hours the link enrols a passkey.
        #[arg(long, value_name = "HOURS", default_value_t = 24)]
        valid_hours: u64,
    },
    /// Every invitation: waiting, expired, or enrolled with its passkey's fingerprint.
    List,
    /// Put an enrolled passkey into the keyring file, once the reviewer has read you the
    /// fingerprint the console showed them; the invitation then goes.
    Confirm {
        /// The invitation's id (`portcullis reviewers list`).
        invite: String,
        /// The fingerprint the reviewer read from the console.
        #[arg(long, value_name = "FINGERPRINT")]
        fingerprint: String,
        /// The keyring file the workers load (created if it does not exist).
        #[arg(long, value_name = "FILE")]
        keyring: PathBuf,
    },
    /// Withdraw an invitation, enrolled or not.
    Withdraw {
        /// The invitation's id.
        invite: String,
    },
}

/// Runs one reviewers command against the store `target` names.
pub async fn run(
    command: Command,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = store::open(target).await?;
    match command {
        Command::Invite {
            id,
            roles,
            tenant,
            console,
            valid_hours,
        } => {
            let mut reviewer = Reviewer::new(id).with_roles(roles);
            if let Some(tenant) = tenant {
                reviewer = reviewer.with_tenant(tenant);
            }
            let now = now_ms();
            let expires = now.saturating_add(valid_hours.saturating_mul(3_600_000));
            let (token, invite) = store
                .invite_reviewer(&reviewer, now, expires)
                .await
                .map_err(CliError::StoreRead)?;
            writeln!(
                out,
                "invitation {} for {} ({}), enrols one passkey within {}:",
                invite.id,
                printable(reviewer.id()),
                printable(&reviewer.roles().join(", ")),
                remaining(expires, now)
            )?;
            writeln!(out, "{}/enrol#{token}", console.trim_end_matches('/'))?;
            Ok(())
        }
        Command::List => list(&store, out).await,
        Command::Confirm {
            invite,
            fingerprint,
            keyring,
        } => confirm(&store, &invite, &fingerprint, &keyring, out).await,
        Command::Withdraw { invite } => {
            if !store
                .remove_invite(&invite)
                .await
                .map_err(CliError::StoreRead)?
            {
                return Err(no_invite(&invite));
            }
            writeln!(out, "invitation {invite} withdrawn")?;
            Ok(())
        }
    }
}

async fn list(store: &Store, out: &mut dyn Write) -> Result<(), CliError> {
    let invites = store.invites().await.map_err(CliError::StoreRead)?;
    if invites.is_empty() {
        writeln!(out, "no invitation is waiting")?;
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<Vec<String>> = invites
        .iter()
        .map(|invite| {
            let state = match &invite.enrolment {
                Some(enrolment) => format!("enrolled, fingerprint {}", enrolment.fingerprint()),
                None if invite.expires_ms <= now => "expired".to_owned(),
                None => format!("waiting, {} left", remaining(invite.expires_ms, now)),
            };
            vec![
                invite.id.clone(),
                printable(invite.reviewer.id()),
                printable(&invite.reviewer.roles().join(", ")),
                invite.reviewer.tenant().map(printable).unwrap_or_default(),
                state,
            ]
        })
        .collect();
    write!(
        out,
        "{}",
        table::render(
            &["INVITATION", "REVIEWER", "ROLES", "TENANT", "STATE"],
            &rows
        )
    )?;
    Ok(())
}

async fn confirm(
    store: &Store,
    id: &str,
    fingerprint: &str,
    path: &Path,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let invites = store.invites().await.map_err(CliError::StoreRead)?;
    let Some(Invite {
        reviewer,
        enrolment: Some(enrolment),
        ..
    }) = invites.into_iter().find(|invite| invite.id == id)
    else {
        return Err(CliError::Usage(format!(
            "no passkey is enrolled with invitation {id}: see `portcullis reviewers list`"
        )));
    };
    let normalized = |text: &str| text.trim().to_ascii_lowercase().replace([' ', ':'], "-");
    if normalized(fingerprint) != enrolment.fingerprint() {
        return Err(CliError::Usage(format!(
            "the fingerprint given is not the enrolled passkey's ({}): the passkey in the store \
             is not the one the reviewer enrolled, or was misread; nothing was confirmed",
            enrolment.fingerprint()
        )));
    }
    let keyring = match std::fs::read_to_string(path) {
        Ok(text) => Keyring::from_json(&text)
            .map_err(|error| CliError::BadFile(path.to_owned(), error.to_string()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Keyring::new(),
        Err(error) => return Err(CliError::ReadFile(path.to_owned(), error)),
    };
    let credential_id = enrolment.credential.credential_id.clone();
    let keyring = keyring.passkey(reviewer.clone(), enrolment.credential);
    write_replacing(path, &keyring.to_json())?;
    store.remove_invite(id).await.map_err(CliError::StoreRead)?;
    writeln!(
        out,
        "{} decides with passkey {} ({}); restart the workers, or reload their keyring, for it to count",
        printable(reviewer.id()),
        printable(&credential_id),
        printable(&reviewer.roles().join(", "))
    )?;
    Ok(())
}

fn no_invite(id: &str) -> CliError {
    CliError::Usage(format!(
        "no invitation {id}: see `portcullis reviewers list`"
    ))
}

/// Replaces the file at `path` with `text` at once: written beside it, then renamed over it,
/// so that a worker loading the keyring never reads half of it.
fn write_replacing(path: &Path, text: &str) -> Result<(), CliError> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|error| CliError::WriteFile(path.to_owned(), error))
}
