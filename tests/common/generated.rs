//! What the parity tests share: a tiny deterministic PRNG, and how they read an outcome.

use std::sync::Once;

use portcullis::Gate;
use portcullis::prelude::*;
use serde_json::Value;

/// xorshift64: the same cases on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn f64_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// FNV-1a, to seed each tool's generator from its name.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Cases the schema cannot judge: a whole number beyond 2^53 written with a fraction or an
/// exponent (`1.9e18`). JSON Schema calls it an integer; the gates refuse it where an integer
/// is expected, because the float it was read as may not hold the number that was written. The
/// same number written as an integer literal is compared as usual.
pub fn holds_inexact_integer(value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            !number.is_i64()
                && !number.is_u64()
                && number.as_f64().is_some_and(|float| {
                    float.fract() == 0.0 && float.abs() > 9_007_199_254_740_992.0
                })
        }
        Value::Array(items) => items.iter().any(holds_inexact_integer),
        Value::Object(entries) => entries.values().any(holds_inexact_integer),
        _ => false,
    }
}

/// Accepted by the gates: completed, waiting for approval, or refused by the execute gate
/// (the tool itself failed, panicked or timed out).
pub fn accepted(outcome: &Outcome) -> bool {
    outcome
        .rejection()
        .is_none_or(|rejection| rejection.gate() == Gate::Execute)
}

/// The buggy tools panic on purpose; their contained panics would flood the output.
pub fn silence_tool_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.contains("while handling") {
                previous(info);
            }
        }));
    });
}
