//! Invitations to review: a token enrols one passkey, once, before it expires, on SQLite and on
//! PostgreSQL; the store keeps the token's digest only.

mod common;

use common::Backend;
use portcullis::encoding::hex;
use portcullis::{PasskeyCredential, PasskeyPublicKey, Reviewer};
use portcullis_stores::{Enrolled, fingerprint};
use sha2::{Digest, Sha256};

const NOW: u64 = 1_800_000_000_000;

fn credential(id: &str) -> PasskeyCredential {
    PasskeyCredential {
        credential_id: id.to_owned(),
        public_key: PasskeyPublicKey::from_text(
            "es256:046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
        )
        .unwrap(),
        rp_id: "localhost".to_owned(),
        origin: "https://localhost:8443".to_owned(),
        sign_count: 0,
    }
}

on_both!(
    a_token_enrols_one_passkey_once_before_it_expires,
    two_consoles_enrolling_one_token_enrol_one_passkey,
);

async fn a_token_enrols_one_passkey_once_before_it_expires(backend: Backend) {
    let store = backend.open().await;
    let rita = Reviewer::new("rita").with_roles(["finance"]);
    let (token, invite) = store
        .invite_reviewer(&rita, NOW, NOW + 1_000)
        .await
        .unwrap();
    assert_eq!(invite.reviewer, rita);
    assert!(invite.enrolment.is_none());
    assert_eq!(store.invite(&token).await.unwrap(), Some(invite.clone()));
    assert_eq!(store.invite("invite_0").await.unwrap(), None);

    let enrolled = store
        .enrol(&token, &credential("AA"), NOW + 10)
        .await
        .unwrap();
    assert_eq!(enrolled, Enrolled::Enrolled);
    let again = store
        .enrol(&token, &credential("BB"), NOW + 20)
        .await
        .unwrap();
    assert_eq!(again, Enrolled::Used);
    let listed = store.invites().await.unwrap();
    assert_eq!(listed.len(), 1);
    let enrolment = listed[0].enrolment.clone().unwrap();
    assert_eq!(enrolment.credential, credential("AA"));
    assert_eq!(enrolment.fingerprint(), fingerprint(&credential("AA")));
    assert_eq!(enrolment.fingerprint().len(), 39);

    let (late, _) = store
        .invite_reviewer(&rita, NOW, NOW + 1_000)
        .await
        .unwrap();
    let expired = store
        .enrol(&late, &credential("CC"), NOW + 1_000)
        .await
        .unwrap();
    assert_eq!(expired, Enrolled::Expired);
    let unknown = store
        .enrol("invite_0", &credential("DD"), NOW)
        .await
        .unwrap();
    assert_eq!(unknown, Enrolled::Unknown);

    // The row is keyed by the token's SHA-256: the token itself is not in the database.
    let (kept, _) = store
        .invite_reviewer(&rita, NOW, NOW + 1_000)
        .await
        .unwrap();
    let digest = hex(&Sha256::digest(kept.as_bytes()));
    backend
        .tamper(&format!(
            "DELETE FROM reviewer_invites WHERE token_hash = '{digest}'"
        ))
        .await;
    assert_eq!(
        store.invite(&kept).await.unwrap(),
        None,
        "{}",
        backend.tag()
    );

    assert!(store.remove_invite(&invite.id).await.unwrap());
    assert!(!store.remove_invite(&invite.id).await.unwrap());
    assert_eq!(store.invite(&token).await.unwrap(), None);
    assert_eq!(store.invites().await.unwrap().len(), 1);
}

async fn two_consoles_enrolling_one_token_enrol_one_passkey(backend: Backend) {
    let store = backend.open().await;
    let (token, _) = store
        .invite_reviewer(&Reviewer::new("rita"), NOW, NOW + 1_000)
        .await
        .unwrap();
    let mut consoles = Vec::new();
    for at in 0..8 {
        let (backend, token) = (backend.clone(), token.clone());
        consoles.push(tokio::spawn(async move {
            let store = backend.open().await;
            store
                .enrol(&token, &credential(&format!("C{at}")), NOW + 1)
                .await
                .unwrap()
        }));
    }
    let mut enrolled = 0;
    for console in consoles {
        if console.await.unwrap() == Enrolled::Enrolled {
            enrolled += 1;
        }
    }
    assert_eq!(enrolled, 1);
}
