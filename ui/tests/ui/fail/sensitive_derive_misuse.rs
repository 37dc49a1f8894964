use portcullis::Sensitive;
use serde::Deserialize;

#[derive(Deserialize, Sensitive)]
enum Secret {
    Pin(u32),
}

#[derive(Deserialize)]
struct Card {
    number: String,
}

#[derive(Deserialize, Sensitive)]
struct Payment {
    #[serde(flatten)]
    card: Card,
}

#[derive(Deserialize, Sensitive)]
struct Login {
    #[sensitive = "yes"]
    password: String,
}

#[derive(Deserialize, Sensitive)]
#[serde(transparent)]
struct Pin {
    #[sensitive]
    digits: String,
}

fn main() {}
