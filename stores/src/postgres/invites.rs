//! Invitations to review in PostgreSQL: a token enrols one passkey, once, before it expires,
//! whichever console instance it reaches.

use std::io;

use portcullis_core::{PasskeyCredential, Reviewer};
use tokio_postgres::Row;

use super::PostgresStore;
use crate::invites::{
    Enrolled, INVITE_COLUMNS, Invite, InviteRow, credential_text, failed, new_row, new_token,
    read_invite, token_hash, why_not_enrolled,
};
use crate::values::as_sql;

fn invite_row(row: &Row) -> Result<InviteRow, tokio_postgres::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
    ))
}

impl PostgresStore {
    /// Invites `reviewer` until `expires_ms`: returns the one-time token (the store keeps
    /// its SHA-256) and the invitation.
    pub async fn invite_reviewer(
        &self,
        reviewer: &Reviewer,
        now_ms: u64,
        expires_ms: u64,
    ) -> io::Result<(String, Invite)> {
        let (token, hash) = new_token();
        let row = new_row(hash, reviewer, now_ms, expires_ms);
        let client = self
            .client()
            .await
            .map_err(|error| failed("store an invitation", error))?;
        client
            .execute(
                &format!(
                    "INSERT INTO reviewer_invites ({INVITE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
                ),
                &[&row.0, &row.1, &row.2, &row.3, &row.4, &row.5],
            )
            .await
            .map_err(|error| failed("store an invitation", error))?;
        Ok((token, read_invite(row)?))
    }

    async fn invite_row(&self, hash: &str) -> io::Result<Option<InviteRow>> {
        let client = self
            .client()
            .await
            .map_err(|error| failed("read an invitation", error))?;
        let row = client
            .query_opt(
                &format!("SELECT {INVITE_COLUMNS} FROM reviewer_invites WHERE token_hash = $1"),
                &[&hash],
            )
            .await
            .map_err(|error| failed("read an invitation", error))?;
        row.map(|row| invite_row(&row))
            .transpose()
            .map_err(|error| failed("read an invitation", error))
    }

    /// The invitation of `token`, if there is one.
    pub async fn invite(&self, token: &str) -> io::Result<Option<Invite>> {
        self.invite_row(&token_hash(token))
            .await?
            .map(read_invite)
            .transpose()
    }

    /// Enrols `credential` with the invitation of `token`: once, before it expires.
    pub async fn enrol(
        &self,
        token: &str,
        credential: &PasskeyCredential,
        now_ms: u64,
    ) -> io::Result<Enrolled> {
        let hash = token_hash(token);
        let client = self
            .client()
            .await
            .map_err(|error| failed("enrol a passkey", error))?;
        let changed = client
            .execute(
                "UPDATE reviewer_invites SET credential = $2, enrolled_ms = $3
                 WHERE token_hash = $1 AND enrolled_ms IS NULL AND expires_ms > $3",
                &[&hash, &credential_text(credential), &as_sql(now_ms)],
            )
            .await
            .map_err(|error| failed("enrol a passkey", error))?;
        if changed == 1 {
            return Ok(Enrolled::Enrolled);
        }
        Ok(why_not_enrolled(self.invite_row(&hash).await?, now_ms))
    }

    /// Every invitation, newest first.
    pub async fn invites(&self) -> io::Result<Vec<Invite>> {
        let client = self
            .client()
            .await
            .map_err(|error| failed("list the invitations", error))?;
        let rows = client
            .query(
                &format!(
                    "SELECT {INVITE_COLUMNS} FROM reviewer_invites ORDER BY created_ms DESC, token_hash"
                ),
                &[],
            )
            .await
            .map_err(|error| failed("list the invitations", error))?;
        rows.iter()
            .map(|row| {
                invite_row(row)
                    .map_err(|error| failed("list the invitations", error))
                    .and_then(read_invite)
            })
            .collect()
    }

    /// Removes the invitation `id` ([`Invite::id`]): confirmed into the keyring, or withdrawn.
    /// `false` if there is none.
    pub async fn remove_invite(&self, id: &str) -> io::Result<bool> {
        let client = self
            .client()
            .await
            .map_err(|error| failed("remove an invitation", error))?;
        let removed = client
            .execute(
                "DELETE FROM reviewer_invites WHERE substr(token_hash, 1, 16) = $1",
                &[&id],
            )
            .await
            .map_err(|error| failed("remove an invitation", error))?;
        Ok(removed > 0)
    }
}
