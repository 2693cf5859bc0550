//! The two number pools and how a subscriber phone selects one.
//!
//! Not for: which numbers belong to a pool (configuration) or leasing them
//! (see [`crate::lease`]).

use std::fmt;

/// Which pool a dial number is issued from. A `phone` starting with `+7`
/// (Russia, Kazakhstan) gets a domestic number; every other country code an
/// international one. One pool can be exhausted while the other has numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pool {
    Domestic,
    International,
}

impl Pool {
    pub const ALL: [Pool; 2] = [Pool::Domestic, Pool::International];

    /// The pool for a subscriber phone already in E.164 form.
    pub fn for_phone(e164: &str) -> Pool {
        if e164.starts_with("+7") {
            Pool::Domestic
        } else {
            Pool::International
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Domestic => "domestic",
            Pool::International => "international",
        }
    }

    pub fn parse(s: &str) -> Option<Pool> {
        match s {
            "domestic" => Some(Pool::Domestic),
            "international" => Some(Pool::International),
            _ => None,
        }
    }

    /// Dense index (0 or 1) for per-pool arrays.
    pub fn index(self) -> usize {
        match self {
            Pool::Domestic => 0,
            Pool::International => 1,
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_seven_is_domestic_everything_else_international() {
        assert_eq!(Pool::for_phone("+79123456789"), Pool::Domestic);
        assert_eq!(Pool::for_phone("+77011234567"), Pool::Domestic);
        assert_eq!(Pool::for_phone("+447911123456"), Pool::International);
        assert_eq!(Pool::for_phone("+17"), Pool::International);
        for p in Pool::ALL {
            assert_eq!(Pool::parse(p.as_str()), Some(p));
        }
    }
}
