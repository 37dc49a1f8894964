use portcullis::Sourced;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Sourced)]
enum Recipient {
    Iban(String),
}

#[derive(Deserialize, Serialize, Sourced)]
struct Payment {
    #[from(user, trusted)]
    recipient: String,
    #[from(user)]
    amount: f64,
}

#[derive(Deserialize, Serialize, Sourced)]
struct Transfer {
    #[from(user)]
    #[from(user)]
    recipient: String,
}

#[derive(Deserialize, Serialize, Sourced)]
struct Hidden {
    #[from(user)]
    #[serde(skip_serializing)]
    recipient: String,
}

#[derive(Deserialize, Serialize, Sourced)]
struct Note {
    #[from(user, entities)]
    pages: Vec<u32>,
}

#[derive(Deserialize, Serialize, Sourced)]
#[serde(transparent)]
struct Iban {
    #[from(user)]
    text: String,
}

fn main() {}
