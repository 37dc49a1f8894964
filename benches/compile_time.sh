#!/usr/bin/env bash
# What `#[tool]` costs to compile, against rmcp's `#[tool]` for tools of the same shape.
#
# Generates, under target/compile-time, a workspace of three library crates:
#   portcullis_50   50 `#[tool]` functions: the reference delete tool's five arguments (a
#                   table name of 3 to 50 characters, a record id of at least 1, an
#                   environment enum, a defaulted flag, an optional note of at most 200
#                   characters), a risk, a role and a reason it cannot be undone; and a
#                   function that registers all of them in a `Registry`;
#   rmcp_50         50 rmcp `#[tool]` methods in one `#[tool_router]` impl, each taking
#                   `Parameters` of an arguments struct with the same fields and the same
#                   constraints (serde, schemars and validator derives), checked in the body;
#                   and a function that returns the router registering them all;
#   portcullis_200  200 tools as in portcullis_50, for the cost per tool of a larger crate.
# Each crate registers its tools in a public function, because that is where the code that
# dispatches to each tool is compiled: a crate whose tools nothing registers (rmcp's
# `tool_router()` alone is private, and code nothing uses is not compiled) leaves that work
# to the crate that does.
# Builds every dependency once and each crate once more, uncounted, then rebuilds each crate
# alone, non-incrementally (`touch src/lib.rs`, `CARGO_INCREMENTAL=0 cargo build -p CRATE`),
# ROUNDS times in turn, and prints the median of each and the ratios. Needs crates.io the first time (rmcp's
# macros). Run from the repository: `bash benches/compile_time.sh`.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
root="$repo/target/compile-time"
mkdir -p "$root"

environment_enum='#[derive(Debug, Clone, Copy, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Production,
}'

# The manifest of crate $1, whose framework is the dependency line $2.
manifest() {
    cat >"$root/$1/Cargo.toml" <<EOF
[package]
name = "$1"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$2
serde = { version = "1", features = ["derive"] }
schemars = "1"
validator = { version = "0.21", features = ["derive"] }
EOF
}

portcullis_crate() {
    local name=$1 tools=$2 dir="$root/$1"
    mkdir -p "$dir/src"
    manifest "$name" "portcullis = { path = \"$repo\" }"
    {
        echo "use portcullis::prelude::*;"
        echo
        echo "$environment_enum"
        for n in $(seq "$tools"); do
            cat <<EOF

/// Delete one record from table set $n.
#[tool(risk = "high", role = "admin", irreversible = "records are deleted for good")]
pub fn delete_record_$n(
    #[validate(length(min = 3, max = 50))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))] admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}
EOF
        done
        echo
        echo "/// Every tool of this crate, registered."
        echo "pub fn registry() -> Result<Registry, portcullis::BuildError> {"
        echo "    Registry::builder()"
        for n in $(seq "$tools"); do
            echo "        .tool(DeleteRecord$n)"
        done
        echo "        .build()"
        echo "}"
    } >"$dir/src/lib.rs"
}

rmcp_crate() {
    local name=$1 tools=$2 dir="$root/$1"
    mkdir -p "$dir/src"
    manifest "$name" 'rmcp = { version = "3.11", default-features = false, features = ["server", "macros"] }'
    {
        echo "use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};"
        echo "use rmcp::{tool, tool_router};"
        echo "use validator::Validate;"
        echo
        echo "$environment_enum"
        for n in $(seq "$tools"); do
            cat <<EOF

#[derive(Debug, serde::Deserialize, schemars::JsonSchema, Validate)]
pub struct DeleteRecord${n}Args {
    #[validate(length(min = 3, max = 50))]
    pub table_name: String,
    #[validate(range(min = 1))]
    pub record_id: u64,
    pub environment: Environment,
    #[serde(default)]
    pub confirm_force: bool,
    #[validate(length(max = 200))]
    pub admin_note: Option<String>,
}
EOF
        done
        cat <<EOF

#[derive(Clone)]
pub struct Records {
    pub tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Records {
EOF
        for n in $(seq "$tools"); do
            cat <<EOF
    /// Delete one record from table set $n.
    #[tool(description = "Delete one record from table set $n.")]
    fn delete_record_$n(&self, Parameters(args): Parameters<DeleteRecord${n}Args>) -> String {
        match args.validate() {
            Ok(()) => args.record_id.to_string(),
            Err(errors) => errors.to_string(),
        }
    }

EOF
        done
        echo "}"
        cat <<EOF

/// Every tool of this crate, registered.
pub fn router() -> ToolRouter<Records> {
    Records::tool_router()
}
EOF
    } >"$dir/src/lib.rs"
}

portcullis_crate portcullis_50 50
portcullis_crate portcullis_200 200
rmcp_crate rmcp_50 50
cat >"$root/Cargo.toml" <<EOF
[workspace]
members = ["portcullis_50", "portcullis_200", "rmcp_50"]
resolver = "3"
EOF
# The repository's versions of the shared dependencies, where the lock file has them.
[ -f "$root/Cargo.lock" ] || cp "$repo/Cargo.lock" "$root/Cargo.lock"

cd "$root"
echo "building the dependencies once..."
# With the flag the rounds use, so that the rounds rebuild nothing but their crate.
export CARGO_INCREMENTAL=0
cargo build -q --workspace

crates=(portcullis_50 rmcp_50 portcullis_200)
# One round first, not counted: it finds the caches as every counted round will.
for crate in "${crates[@]}"; do
    touch "$crate/src/lib.rs"
    cargo build -q -p "$crate"
done
declare -A times
for round in $(seq "$ROUNDS"); do
    for crate in "${crates[@]}"; do
        touch "$crate/src/lib.rs"
        started=$(date +%s%N)
        cargo build -q -p "$crate"
        ended=$(date +%s%N)
        times[$crate]+="$(((ended - started) / 1000000)) "
    done
    echo "round $round of $ROUNDS done"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
p50=$(echo "${times[portcullis_50]}" | median)
r50=$(echo "${times[rmcp_50]}" | median)
p200=$(echo "${times[portcullis_200]}" | median)
echo "non-incremental rebuild of one crate, median of $ROUNDS (ms each: portcullis_50 ${times[portcullis_50]}| rmcp_50 ${times[rmcp_50]}| portcullis_200 ${times[portcullis_200]})"
awk -v p50="$p50" -v r50="$r50" -v p200="$p200" 'BEGIN {
    printf "  50 #[tool]s:  portcullis %6.2f s, rmcp %6.2f s: %.2fx (target <= 1.00: %s)\n",
        p50 / 1000, r50 / 1000, p50 / r50, (p50 <= r50 ? "met" : "NOT met");
    printf "  per tool:     portcullis_50 %.1f ms, portcullis_200 %.1f ms\n", p50 / 50, p200 / 200;
}'
