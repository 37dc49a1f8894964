//! `portcullis reviewers`: reviewers who decide in the console with a passkey. The operator
//! invites a reviewer with the roles the keyring will give them; the reviewer opens the link
//! and enrols a passkey in the console; the operator confirms the enrolment into the keyring
//! file the workers load, once the fingerprint the reviewer reads from the console matches.
//! Until then the passkey decides nothing: the keyring is the operator's, never the console's.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use portcullis_core::encoding::random_id;
use portcullis_core::{Keyring, Reviewer};
use portcullis_stores::{Invite, Store};

use crate::error::CliError;
use crate::store;
use crate::table::{self, now_ms, printable, remaining};

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
    /// fingerprint the console showed them; the invitation then goes. Say again whom you
    /// invited, with which roles and tenant: the store's row is not trusted for it.
    Confirm {
        /// The invitation's id (`portcullis reviewers list`).
        invite: String,
        /// The fingerprint the reviewer read from the console.
        #[arg(long, value_name = "FINGERPRINT")]
        fingerprint: String,
        /// The reviewer you invited.
        #[arg(long = "reviewer", value_name = "ID")]
        id: String,
        /// Each role you invited them with (repeat it).
        #[arg(long = "role", value_name = "ROLE", required = true)]
        roles: Vec<String>,
        /// The tenant you invited them for, if any.
        #[arg(long)]
        tenant: Option<String>,
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
            id,
            roles,
            tenant,
            keyring,
        } => {
            let mut invited = Reviewer::new(id).with_roles(roles);
            if let Some(tenant) = tenant {
                invited = invited.with_tenant(tenant);
            }
            confirm(&store, &invite, &fingerprint, &invited, &keyring, out).await
        }
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

/// Whether two reviewers are the same person with the same roles and tenant, the roles in any
/// order.
fn same_grant(a: &Reviewer, b: &Reviewer) -> bool {
    let roles = |reviewer: &Reviewer| {
        let mut roles = reviewer.roles().to_vec();
        roles.sort();
        roles.dedup();
        roles
    };
    a.id() == b.id() && a.tenant() == b.tenant() && roles(a) == roles(b)
}

fn describe(reviewer: &Reviewer) -> String {
    let tenant = reviewer
        .tenant()
        .map(|tenant| format!(", tenant {}", printable(tenant)))
        .unwrap_or_default();
    format!(
        "{} ({}{tenant})",
        printable(reviewer.id()),
        printable(&reviewer.roles().join(", "))
    )
}

async fn confirm(
    store: &Store,
    id: &str,
    fingerprint: &str,
    invited: &Reviewer,
    path: &Path,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut found: Vec<Invite> = store
        .invites()
        .await
        .map_err(CliError::StoreRead)?
        .into_iter()
        .filter(|invite| invite.id == id)
        .collect();
    if found.len() > 1 {
        return Err(CliError::Usage(format!(
            "{} invitations have the id {id}: someone wrote them into the store; withdraw              them and invite again",
            found.len()
        )));
    }
    let Some(Invite {
        reviewer,
        enrolment: Some(enrolment),
        ..
    }) = found.pop()
    else {
        return Err(CliError::Usage(format!(
            "no passkey is enrolled with invitation {id}: see `portcullis reviewers list`"
        )));
    };
    if !same_grant(&reviewer, invited) {
        return Err(CliError::Usage(format!(
            "invitation {id} in the store is for {}, not {} as you say: the store's row was              changed, or you named another invitation; nothing was confirmed",
            describe(&reviewer),
            describe(invited)
        )));
    }
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
    if let Some(held) = keyring
        .reviewers()
        .into_iter()
        .find(|held| held.id() == invited.id())
        && !same_grant(held, invited)
    {
        return Err(CliError::Usage(format!(
            "the keyring holds {} already: a reviewer decides with one set of roles; change              them in the keyring file, then confirm",
            describe(held)
        )));
    }
    let credential_id = enrolment.credential.credential_id.clone();
    if keyring
        .passkeys_of(invited.id())
        .any(|(_, held)| held.credential_id == credential_id)
    {
        return Err(CliError::Usage(format!(
            "the keyring holds passkey {} for {} already",
            printable(&credential_id),
            printable(invited.id())
        )));
    }
    let keyring = keyring.passkey(invited.clone(), enrolment.credential);
    write_replacing(path, &keyring.to_json())?;
    store.remove_invite(id).await.map_err(CliError::StoreRead)?;
    writeln!(
        out,
        "{} decides with passkey {}; restart the workers, or reload their keyring, for it to count",
        describe(invited),
        printable(&credential_id),
    )?;
    Ok(())
}

fn no_invite(id: &str) -> CliError {
    CliError::Usage(format!(
        "no invitation {id}: see `portcullis reviewers list`"
    ))
}

/// Replaces the file at `path` with `text` at once: written to a new file beside it (never one
/// that is there, a link planted under its name say), on the disk, then renamed over it, so
/// that a worker loading the keyring never reads half of it.
fn write_replacing(path: &Path, text: &str) -> Result<(), CliError> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(format!(".{}", random_id("partial")));
    let partial = PathBuf::from(partial);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&partial)?;
        writeln!(file, "{text}")?;
        file.sync_all()?;
        std::fs::rename(&partial, path)
    })();
    written.map_err(|error| {
        let _ = std::fs::remove_file(&partial);
        CliError::WriteFile(path.to_owned(), error)
    })
}
