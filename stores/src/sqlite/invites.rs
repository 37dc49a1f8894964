//! Invitations to review in SQLite: a token enrols one passkey, once, before it expires.

use std::io;

use portcullis_core::{PasskeyCredential, Reviewer};
use rusqlite::{Connection, OptionalExtension};

use super::SqliteStore;
use crate::invites::{
    Enrolled, INVITE_COLUMNS, Invite, InviteRow, credential_text, failed, new_row, new_token,
    read_invite, token_hash, why_not_enrolled,
};
use crate::values::as_sql;

fn invite_row(row: &rusqlite::Row<'_>) -> Result<InviteRow, rusqlite::Error> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn get(connection: &Connection, hash: &str) -> Result<Option<InviteRow>, rusqlite::Error> {
    connection
        .query_row(
            &format!("SELECT {INVITE_COLUMNS} FROM reviewer_invites WHERE token_hash = ?1"),
            [hash],
            invite_row,
        )
        .optional()
}

impl SqliteStore {
    /// Invites `reviewer` until `expires_ms`: returns the one-time token (the store keeps
    /// its SHA-256) and the invitation.
    pub fn invite_reviewer(
        &self,
        reviewer: &Reviewer,
        now_ms: u64,
        expires_ms: u64,
    ) -> io::Result<(String, Invite)> {
        let (token, hash) = new_token();
        let row = new_row(hash, reviewer, now_ms, expires_ms);
        self.lock()
            .execute(
                &format!("INSERT INTO reviewer_invites ({INVITE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                rusqlite::params![row.0, row.1, row.2, row.3, row.4, row.5],
            )
            .map_err(|error| failed("store an invitation", error))?;
        Ok((token, read_invite(row)?))
    }

    /// The invitation of `token`, if there is one.
    pub fn invite(&self, token: &str) -> io::Result<Option<Invite>> {
        get(&self.lock(), &token_hash(token))
            .map_err(|error| failed("read an invitation", error))?
            .map(read_invite)
            .transpose()
    }

    /// Enrols `credential` with the invitation of `token`: once, before it expires.
    pub fn enrol(
        &self,
        token: &str,
        credential: &PasskeyCredential,
        now_ms: u64,
    ) -> io::Result<Enrolled> {
        let hash = token_hash(token);
        let connection = self.lock();
        let changed = connection
            .execute(
                "UPDATE reviewer_invites SET credential = ?2, enrolled_ms = ?3
                 WHERE token_hash = ?1 AND enrolled_ms IS NULL AND expires_ms > ?3",
                rusqlite::params![hash, credential_text(credential), as_sql(now_ms)],
            )
            .map_err(|error| failed("enrol a passkey", error))?;
        if changed == 1 {
            return Ok(Enrolled::Enrolled);
        }
        let row = get(&connection, &hash).map_err(|error| failed("read an invitation", error))?;
        Ok(why_not_enrolled(row, now_ms))
    }

    /// Every invitation, newest first.
    pub fn invites(&self) -> io::Result<Vec<Invite>> {
        let connection = self.lock();
        let rows = connection
            .prepare(&format!(
                "SELECT {INVITE_COLUMNS} FROM reviewer_invites ORDER BY created_ms DESC, token_hash"
            ))
            .and_then(|mut statement| {
                statement
                    .query_map([], invite_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|error| failed("list the invitations", error))?;
        rows.into_iter().map(read_invite).collect()
    }

    /// Removes the invitation `id` ([`Invite::id`]): confirmed into the keyring, or withdrawn.
    /// `false` if there is none.
    pub fn remove_invite(&self, id: &str) -> io::Result<bool> {
        let removed = self
            .lock()
            .execute(
                "DELETE FROM reviewer_invites WHERE substr(token_hash, 1, 16) = ?1",
                [id],
            )
            .map_err(|error| failed("remove an invitation", error))?;
        Ok(removed > 0)
    }
}
