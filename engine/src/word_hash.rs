//! A hasher for hash maps keyed by words the service chose itself: its
//! configured numbers ([`crate::e164::PackedNumber`]) and its verification
//! ids' halves ([`crate::ids::VerificationKey`], 80 of whose bits are
//! random, drawn here). One rotation, one xor and one multiplication a
//! word.
//!
//! Why not the standard SipHash: these maps are touched for every lease,
//! every end and every GET held in memory, and SipHash took about a tenth
//! of number health's work per lease (`cargo bench --bench number_health`).
//!
//! Not for keys a peer chooses: a multiplication does not resist
//! collisions made on purpose. Number health's numbers all come from the
//! configuration (a call to any other number is refused before it counts),
//! and only ids of verifications that exist are held.

use std::hash::{BuildHasherDefault, Hasher};

/// See the module doc.
#[derive(Default)]
pub struct WordHasher(u64);

/// A hash map's hasher by [`WordHasher`].
pub type BuildWordHasher = BuildHasherDefault<WordHasher>;

impl Hasher for WordHasher {
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn finish(&self) -> u64 {
        // The product's high bits are its best mixed; fold some into the
        // low ones, which pick the bucket.
        self.0 ^ (self.0 >> 29)
    }
}
