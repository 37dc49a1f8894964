//! The keywords of numbers and strings: bounds, multiples, lengths, patterns and formats.

use serde_json::{Map, Number, Value};
use validator::{ValidateEmail, ValidateUrl};

use super::compiled::{Compiled, Format, compare};
use super::findings::{Findings, Step, bounds, constraint, describe, length_message};
use crate::json::integer_value;

impl Compiled {
    pub(super) fn check_number(&self, number: &Number, path: &[Step<'_>], out: &mut Findings) {
        let below = |bound: &Option<Number>, strict: bool| {
            bound
                .as_ref()
                .is_some_and(|bound| match compare(number, bound) {
                    Some(order) => order.is_lt() || (strict && order.is_eq()),
                    None => true,
                })
        };
        let above = |bound: &Option<Number>, strict: bool| {
            bound
                .as_ref()
                .is_some_and(|bound| match compare(number, bound) {
                    Some(order) => order.is_gt() || (strict && order.is_eq()),
                    None => true,
                })
        };
        if below(&self.minimum, false)
            || below(&self.exclusive_minimum, true)
            || above(&self.maximum, false)
            || above(&self.exclusive_maximum, true)
        {
            let mut params = Map::new();
            for (name, bound) in [
                ("min", &self.minimum),
                ("exclusive_min", &self.exclusive_minimum),
                ("max", &self.maximum),
                ("exclusive_max", &self.exclusive_maximum),
            ] {
                if let Some(bound) = bound {
                    params.insert(name.to_owned(), Value::Number(bound.clone()));
                }
            }
            let message = describe("range", &params, false);
            out.push(constraint(path, "range", message, params));
        }
        if let Some(divisor) = &self.multiple_of
            && !is_multiple(number, divisor)
        {
            let mut params = Map::new();
            params.insert("multiple_of".to_owned(), Value::Number(divisor.clone()));
            out.push(constraint(
                path,
                "multiple_of",
                format!("must be a multiple of {divisor}"),
                params,
            ));
        }
    }

    pub(super) fn check_string(&self, text: &str, path: &[Step<'_>], out: &mut Findings) {
        // Reading a string costs by its length: a long one, looked at under many unions, must
        // not cost more than the budget allows.
        let reads = self.min_length.is_some()
            || self.max_length.is_some()
            || self.pattern.is_some()
            || self.format.is_some();
        if reads {
            out.visits_left = out.visits_left.saturating_sub(text.len() / 64);
        }

        if self.min_length.is_some() || self.max_length.is_some() {
            let length = text.chars().count() as u64;
            if self.min_length.is_some_and(|min| length < min)
                || self.max_length.is_some_and(|max| length > max)
            {
                let params = bounds("min", self.min_length, "max", self.max_length);
                let message = length_message(&params, "characters");
                out.push(constraint(path, "length", message, params));
            }
        }
        if let Some((regex, pattern)) = &self.pattern
            && !regex.is_match(text)
        {
            let mut params = Map::new();
            params.insert("pattern".to_owned(), Value::String(pattern.clone()));
            let message = format!("must match the pattern {}", Value::String(pattern.clone()));
            out.push(constraint(path, "pattern", message, params));
        }
        match self.format {
            Some(Format::Email) if !text.validate_email() => {
                out.push(constraint(
                    path,
                    "email",
                    "must be an email address".to_owned(),
                    Map::new(),
                ));
            }
            Some(Format::Uri) if !text.validate_url() => {
                out.push(constraint(
                    path,
                    "url",
                    "must be a URL".to_owned(),
                    Map::new(),
                ));
            }
            _ => {}
        }
    }
}

fn is_multiple(number: &Number, divisor: &Number) -> bool {
    match (integer_value(number), integer_value(divisor)) {
        (Some(_), Some(0)) => false,
        (Some(number), Some(divisor)) => number % divisor == 0,
        _ => match (number.as_f64(), divisor.as_f64()) {
            (Some(number), Some(divisor)) if divisor != 0.0 => (number / divisor).fract() == 0.0,
            _ => false,
        },
    }
}
