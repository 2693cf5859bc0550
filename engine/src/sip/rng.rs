//! The randomness the SIP machines need: branch ids, tags, Call-IDs, nonces
//! and backoff jitter. A seeded SplitMix64, so a test with a fixed seed
//! replays the same bytes; the binary seeds it from the OS.
//!
//! Not for: anything secret (digest responses use the provider's nonce;
//! client nonces only need to be unlikely to repeat).

/// Sebastiano Vigna's SplitMix64: tiny, fast, and good enough for ids.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, from the top 53 bits (all an `f64` holds).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// 16 lowercase hex characters.
    pub fn hex(&mut self) -> String {
        format!("{:016x}", self.next_u64())
    }

    /// A value in `0..bound` (`0` when `bound` is 0). The modulo bias is
    /// irrelevant for jitter.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_eq!(a.hex().len(), 16);
        assert!(a.below(10) < 10);
        assert_eq!(a.below(0), 0);
    }
}
