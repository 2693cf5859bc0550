//! Search of a sorted sequence whose keys are spread fairly evenly: a few
//! interpolation guesses, then a binary search. The held rows (keys issued
//! in time order at a steady rate) and number health's sorted numbers
//! (configured in ranges) both search this way.
//!
//! Why not a plain binary search: over a few hundred thousand entries it
//! takes 17 to 19 dependent probes, most of them cache misses; a guess from
//! the key's value lands within a handful of entries in one or two. When
//! the keys are not even (a burst, numbers of several lengths) the guesses
//! still narrow the range and the binary search finishes, so the answer
//! is always the binary search's.
//!
//! Not for: holding the sequence; callers read their keys through a
//! closure, whatever they are stored in.

use std::cmp::Ordering;

/// Guesses before the binary search takes over.
const GUESSES_MAX: usize = 6;
/// Below this many candidates a binary search is as quick as a guess.
const GUESS_SPAN_MIN: usize = 16;

/// Where `target` is among `len` keys in ascending order, read by
/// `key_at(index)`: `Ok(index)` when found, `Err(index)` where it would
/// go. `weight` maps a key to a number that grows with it (not strictly:
/// equal weights are fine) and drives the guesses.
pub fn position<K: Ord + Copy>(
    len: usize,
    key_at: impl Fn(usize) -> K,
    target: K,
    weight: impl Fn(K) -> u64,
) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, len);
    let aim = weight(target);
    for _ in 0..GUESSES_MAX {
        if hi - lo <= GUESS_SPAN_MIN {
            break;
        }
        let (first, last) = (weight(key_at(lo)), weight(key_at(hi - 1)));
        if aim <= first || aim >= last {
            break;
        }
        // first < aim < last, so the guess is in lo..hi - 1.
        let span = u128::from(last - first);
        let offset = u128::from(aim - first) * (hi - 1 - lo) as u128 / span;
        let guess = lo + offset as usize;
        match key_at(guess).cmp(&target) {
            Ordering::Equal => return Ok(guess),
            Ordering::Less => lo = guess + 1,
            Ordering::Greater => hi = guess,
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key_at(mid).cmp(&target) {
            Ordering::Equal => return Ok(mid),
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
        }
    }
    Err(lo)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sip::rng::SplitMix64;

    /// Even keys, bursts, long gaps and repeated weights: always the
    /// binary search's answer, for keys present and absent.
    #[test]
    fn finds_what_a_binary_search_finds() {
        let mut rng = SplitMix64::new(7);
        let mut keys: Vec<u64> = Vec::new();
        let mut at = 1_000u64;
        for i in 0..20_000u64 {
            at += match i % 5000 {
                0 => 1 << 40,                   // a long gap
                1..=1500 => 1,                  // a burst
                _ => 1 + rng.next_u64() % 1000, // steady
            };
            keys.push(at);
        }
        let weights: [fn(u64) -> u64; 2] = [|k| k, |k| k >> 20];
        for weight in weights {
            for probe in 0..5_000u64 {
                let target = match probe % 3 {
                    0 => keys[(rng.next_u64() % keys.len() as u64) as usize],
                    1 => keys[(rng.next_u64() % keys.len() as u64) as usize] + 1,
                    _ => rng.next_u64() % (at + 10),
                };
                let got = position(keys.len(), |i| keys[i], target, weight);
                assert_eq!(got, keys.binary_search(&target), "target {target}");
            }
        }
        assert_eq!(position(0, |i| keys[i], 5, |k| k), Err(0));
    }
}
