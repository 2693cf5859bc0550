//! The C allocator's one setting for a serving process: blocks of
//! [`MMAP_THRESHOLD_BYTES`] and more get mappings of their own, so that
//! freeing one gives its memory back to the system at once.
//!
//! Why: glibc raises its mapping threshold to the size of every mapped
//! block that is freed (up to 32 MiB). A service grows tables of hundreds
//! of thousands of entries (the lease table, number health, the held rows,
//! the expiry schedule, SQLite's caches) by reallocation; after the first
//! few are freed, the threshold has risen above the rest, and every later
//! grown-and-freed table stays in the heap as free memory that counts as
//! resident. Measured with `tools/serving-memory.sh` (benches/README.md,
//! "Memory the allocator kept"): after 300,000 creates a third of the
//! process's growth was freed blocks glibc held. A fixed threshold turns
//! the dynamic raise off. Requests allocate far below it (a TLS record is
//! 16 KiB), so no request pays a mapping.
//!
//! An operator's own `GLIBC_TUNABLES` setting of the threshold is left as
//! it is. Not for: other allocators (with another C library this does
//! nothing).

/// Blocks this large or larger are mapped on their own.
pub const MMAP_THRESHOLD_BYTES: usize = 256 * 1024;

/// Sets the threshold, unless the operator set it in `GLIBC_TUNABLES`.
/// Called once, before the service starts its threads.
pub fn tune() {
    let operator_set = std::env::var("GLIBC_TUNABLES")
        .is_ok_and(|tunables| tunables.contains("glibc.malloc.mmap_threshold"));
    if operator_set {
        tracing::info!("malloc's mmap threshold is the one GLIBC_TUNABLES sets");
        return;
    }
    if !set_mmap_threshold(MMAP_THRESHOLD_BYTES) {
        tracing::warn!(
            bytes = MMAP_THRESHOLD_BYTES,
            "could not set malloc's mmap threshold: freed large tables may stay resident"
        );
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold(bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: mallopt takes two integers and changes a setting of glibc's
    // allocator under the allocator's own lock; no memory is passed.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold(_bytes: usize) -> bool {
    true
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Bytes in blocks glibc mapped on their own.
    fn mapped_bytes() -> usize {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        unsafe { libc::mallinfo2().hblkhd }
    }

    /// The reason for the setting: once a large block was freed, a block
    /// a quarter its size is still mapped on its own (and so given back
    /// when freed). With glibc's default the freed block raises the
    /// threshold to its size and the second block comes from the heap.
    /// (nextest runs each test in a process of its own, so no other test
    /// maps or frees blocks meanwhile.)
    #[test]
    fn a_block_past_the_threshold_is_mapped_even_after_a_larger_was_freed() {
        tune();
        drop(std::hint::black_box(vec![1u8; 4 * 1024 * 1024]));
        let before = mapped_bytes();
        let block = std::hint::black_box(vec![1u8; 1024 * 1024]);
        let grew = mapped_bytes().saturating_sub(before);
        assert!(
            grew >= block.len(),
            "a 1 MiB block after a freed 4 MiB one: {grew} bytes more mapped \
             (the threshold rose with the freed block, as by glibc's default)"
        );
        assert!(set_mmap_threshold(MMAP_THRESHOLD_BYTES), "glibc takes it");
    }
}
